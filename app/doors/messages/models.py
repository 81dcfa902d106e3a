"""The upstream's model list as Anthropic's API gives it (`GET /v1/models` with an `anthropic-version` header),
so that the Anthropic SDK's `client.models.list()` and Claude Code's model picker read it."""

from datetime import UTC, datetime
from typing import Any

from app.openai.schemas import rewrite_model_list

ANTHROPIC_VERSION_HEADER = "anthropic-version"  # every Anthropic SDK sends it; OpenAI's clients never do


def anthropic_model_list(body: bytes) -> bytes:
    """`{data: [{type: "model", id, display_name, created_at}], has_more: false, first_id, last_id}` of an
    OpenAI `/models` answer; the body as it was when it is not such a list."""
    return rewrite_model_list(body, _models, _anthropic_answer)


def _models(entries: list[Any]) -> list[Any]:
    return [_model(entry) for entry in entries if isinstance(entry, dict) and isinstance(entry.get("id"), str)]


def _anthropic_answer(_sent: dict[str, Any], models: list[Any]) -> dict[str, Any]:
    return {"data": models, "has_more": False, "first_id": models[0]["id"] if models else None,
            "last_id": models[-1]["id"] if models else None}


def _model(entry: dict[str, Any]) -> dict[str, Any]:
    created = entry.get("created")
    when = created if isinstance(created, int) and not isinstance(created, bool) and created >= 0 else 0
    name = entry.get("name") if isinstance(entry.get("name"), str) else entry["id"]
    return {"type": "model", "id": entry["id"], "display_name": name,
            "created_at": datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
