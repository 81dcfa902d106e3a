"""The upstream's model list as Anthropic's API gives it (`GET /v1/models` with an `anthropic-version` header),
so that the Anthropic SDK's `client.models.list()` and Claude Code's model picker read it."""

from datetime import UTC, datetime

from app.openai.schemas import rewrite_model_list
from app.openai.wire import JSONObject, JSONValue

ANTHROPIC_VERSION_HEADER = "anthropic-version"  # every Anthropic SDK sends it; OpenAI's clients never do


def anthropic_model_list(body: bytes) -> bytes:
    """`{data: [{type: "model", id, display_name, created_at}], has_more: false, first_id, last_id}` of an
    OpenAI `/models` answer; the body as it was when it is not such a list."""
    return rewrite_model_list(body, _models, _anthropic_answer)


def _models(entries: list[JSONValue]) -> list[JSONValue]:
    return [_model(entry, model_id) for entry in entries
            if isinstance(entry, dict) and isinstance(model_id := entry.get("id"), str)]


def _anthropic_answer(_sent: JSONObject, models: list[JSONValue]) -> JSONObject:
    return {"data": models, "has_more": False, "first_id": _id(models[0]) if models else None,
            "last_id": _id(models[-1]) if models else None}


def _id(model: JSONValue) -> JSONValue:
    return model["id"] if isinstance(model, dict) else None  # a model of _models: always an object


def _model(entry: JSONObject, model_id: str) -> JSONObject:
    created = entry.get("created")
    when = created if isinstance(created, int) and not isinstance(created, bool) and created >= 0 else 0
    name = given if isinstance(given := entry.get("name"), str) else model_id
    return {"type": "model", "id": model_id, "display_name": name,
            "created_at": datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
