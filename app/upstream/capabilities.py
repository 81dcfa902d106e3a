"""What the upstream is and can do: LM Studio (its REST API), llama.cpp (`/props`) or another server; each
model's context length; vision.

Asked of the server's own endpoints beside /v1 and remembered for CAPABILITY_TTL: models get loaded and
unloaded. A server that does not say is no error: the answer is then "cannot tell" (False, None, empty).
"""

import time
from dataclasses import dataclass
from typing import Literal

from app.openai.wire import JSONObject, JSONValue
from app.upstream.transport import UpstreamHttp

ServerKind = Literal["lmstudio", "llamacpp", "openai-compatible", "unreachable"]
CAPABILITY_TTL = 60.0  # models get loaded and unloaded; ask again after this many seconds
_LMSTUDIO_APIS = ("api/v1/models", "api/v0/models")


class Capabilities:
    """One upstream's kind and its models' capabilities, asked over `http` and remembered a while."""

    def __init__(self, http: UpstreamHttp) -> None:
        self._http = http
        self._kind: tuple[ServerKind, float] | None = None
        self._models: tuple[list[ModelInfo], float] | None = None
        self._props_context: tuple[int | None, float] | None = None

    async def server_kind(self) -> ServerKind:
        """What answers at the base URL: LM Studio (its REST API), llama.cpp (`/props`), or another server."""
        now = time.monotonic()
        if self._kind is None or (self._kind[0] == "unreachable" and now - self._kind[1] > CAPABILITY_TTL / 4):
            self._kind = (await self._probe_kind(), now)
        return self._kind[0]

    def forget(self) -> None:
        """A server that answers again (perhaps another one, with other models): everything asked again."""
        self._kind = self._models = self._props_context = None

    async def supports_vision(self, model: str | None) -> bool:
        """Whether LM Studio reports vision for this model; False when it cannot tell."""
        for entry in await self._lmstudio_models():
            if model is None or model in entry.names:
                return entry.vision
        return False

    async def context_lengths(self) -> dict[str, int]:
        """Each model's context length as LM Studio reports it (loaded, else maximum); empty elsewhere."""
        return {name: e.context_length for e in await self._lmstudio_models() if e.context_length
                for name in e.names}

    async def context_length(self, model: str | None) -> int | None:
        """The context a request for `model` gets: LM Studio's loaded context for it (else its maximum), else
        llama.cpp's (`/props`, which serves one model whatever the request names); None when neither says."""
        lmstudio = await self.context_lengths()
        if lmstudio:
            return lmstudio.get(model or "")
        return await self._llamacpp_context()

    async def _probe_kind(self) -> ServerKind:
        for path in _LMSTUDIO_APIS:
            response = await self._http.probe(path)
            if response is None:
                return "unreachable"
            if response.status_code == 200:
                return "lmstudio"
        response = await self._http.probe("props")
        if response is None:
            return "unreachable"
        if response.status_code == 200 and "default_generation_settings" in response.text:
            return "llamacpp"
        return "openai-compatible"

    async def _llamacpp_context(self) -> int | None:
        now = time.monotonic()
        if self._props_context is None or now - self._props_context[1] >= CAPABILITY_TTL:
            self._props_context = (await self._fetch_llamacpp_context(), now)
        return self._props_context[0]

    async def _fetch_llamacpp_context(self) -> int | None:
        """`default_generation_settings.n_ctx` of llama.cpp's `GET /props`: the context of one slot, which is
        what one request gets when `--parallel` splits the server's (older builds and some forks put `n_ctx`
        at the top level)."""
        response = await self._http.probe("props")
        if response is None or response.status_code != 200:
            return None
        try:
            props = response.json()
        except ValueError:
            return None
        if not isinstance(props, dict):
            return None
        settings = props.get("default_generation_settings")
        slot = _int(settings.get("n_ctx")) if isinstance(settings, dict) else None
        return slot or _int(props.get("n_ctx"))

    async def lmstudio_models_now(self) -> list["ModelInfo"] | None:
        """LM Studio's models asked now (and remembered as if asked for a request); None when no answer came at
        all, [] from another server. For the status page, which shows what is loaded this minute."""
        models = await self._fetch_lmstudio_models()
        self._models = (models or [], time.monotonic())
        return models

    async def _lmstudio_models(self) -> list["ModelInfo"]:
        now = time.monotonic()
        if self._models is not None and now - self._models[1] < CAPABILITY_TTL:
            return self._models[0]
        return await self.lmstudio_models_now() or []

    async def _fetch_lmstudio_models(self) -> list["ModelInfo"] | None:
        """The models of LM Studio's REST API: v1 where it has one, else v0; none from another server, None when
        nothing answered."""
        for path in _LMSTUDIO_APIS:
            response = await self._http.probe(path)
            if response is None:
                return None
            if response.status_code == 200:
                try:
                    return ModelInfo.listed(path, response.json())
                except (ValueError, AttributeError):
                    return []
        return []


@dataclass(frozen=True)
class ModelInfo:
    """What LM Studio's REST API says of one model."""

    names: frozenset[str]
    vision: bool
    context_length: int | None  # the loaded context, else the most the model takes
    key: str = ""  # the name LM Studio lists it by
    loaded: bool = False

    @classmethod
    def listed(cls, path: str, listing: JSONValue) -> list["ModelInfo"]:
        """The models of one of `_LMSTUDIO_APIS`' listings (`path` says which)."""
        if not isinstance(listing, dict):
            raise AttributeError("a model listing that is not a JSON object")  # as `.get` on it raised before
        if path == "api/v1/models":
            return [cls.from_v1(entry) for entry in _objects(listing.get("models"))]
        return [cls.from_v0(entry) for entry in _objects(listing.get("data"))]

    @classmethod
    def from_v1(cls, entry: JSONObject) -> "ModelInfo":
        instances = _objects(entry.get("loaded_instances"))
        loaded = [_int(_object(i.get("config")).get("context_length")) for i in instances]
        names = {entry.get("key"), entry.get("id"), *(i.get("id") for i in instances)}
        key = entry.get("key") or entry.get("id")
        return cls(
            names=frozenset(n for n in names if isinstance(n, str)),
            vision=bool(_object(entry.get("capabilities")).get("vision")),
            context_length=next((c for c in loaded if c), None) or _int(entry.get("max_context_length")),
            key=key if isinstance(key, str) else "",
            loaded=bool(instances),
        )

    @classmethod
    def from_v0(cls, entry: JSONObject) -> "ModelInfo":
        context = _int(entry.get("loaded_context_length")) or _int(entry.get("max_context_length"))
        name = str(entry.get("id"))
        return cls(frozenset([name]), entry.get("type") == "vlm", context, name, entry.get("state") == "loaded")


def _objects(value: JSONValue) -> list[JSONObject]:
    """A listing's entries: a list's objects (a list, as the server writes it, holds nothing else)."""
    if not value:
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise AttributeError("a model listing's entries are not a list of JSON objects")  # as `.get` raised before
    return [item for item in value if isinstance(item, dict)]


def _object(value: JSONValue) -> JSONObject:
    """A JSON object, or an empty one for a field left out (null, absent)."""
    if not value:
        return {}
    if not isinstance(value, dict):
        raise AttributeError("a model's field is not a JSON object")  # as `.get` raised before
    return value


def _int(value: JSONValue) -> int | None:
    """A positive integer, else None (a count a server left out, zeroed or wrote as text)."""
    return value if isinstance(value, int) and value > 0 else None
