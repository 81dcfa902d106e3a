"""What a person reads in the console once the gateway has started: where the status page is, and whether the
model server answers, with its models. Plain info lines: a model server not started yet is the usual state of a
first start, not an error (chats say how to start it until it answers); a server that answers but refuses the
model list (a wrong TOOLBRIDGE_UPSTREAM_API_KEY) is a warning.
"""

import ipaddress

import structlog

from app.settings import ServerSettings
from app.upstream import ModelSeen, UpstreamClient

log = structlog.get_logger("toolbridge.app")

MODELS_NAMED = 5  # a server listing more is summed up: the status page lists them all


async def greet(settings: ServerSettings, upstream: UpstreamClient) -> None:
    """The start-up lines, after the first look at the model server (bounded by the probes' timeout)."""
    log.info("status_page", url=status_page_url(settings.host, settings.port))
    try:
        state = await upstream.watch.look()
    except Exception as exc:  # boundary: a courtesy line must never stop the gateway; the log says what broke
        log.warning("model_server_not_looked_at", url=upstream.base_url, exc_info=exc)
        return
    if not state.reachable:
        log.info("model_server_not_answering", url=upstream.base_url,
                 next_step="start LM Studio's local server (Developer tab -> Start Server) or another "
                 "OpenAI-compatible server; toolbridge uses it as soon as it answers, and chats say so meanwhile")
    elif state.problem:
        log.warning("model_server_refuses", url=upstream.base_url, error=state.problem)
    else:
        log.info("model_server_answers", url=upstream.base_url, models=models_in_words(state.models))


def status_page_url(host: str, port: int) -> str:
    """The status page's address for a browser on this machine: a wildcard host is reached on loopback."""
    name = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    try:
        literal = ipaddress.ip_address(name)
    except ValueError:
        literal = None
    return f"http://[{name}]:{port}/" if isinstance(literal, ipaddress.IPv6Address) else f"http://{name}:{port}/"


def models_in_words(models: tuple[ModelSeen, ...]) -> str:
    """`qwen3-8b (8,192-token context)`: the loaded models where the server says which (LM Studio), else those
    it lists; how many more are downloaded."""
    shown = [model for model in models if model.loaded is not False]
    idle = len(models) - len(shown)
    if not shown:
        return f"none loaded ({idle} downloaded): load one in LM Studio, or let its JIT loading load it at the " \
            "first request" if idle else "none listed"
    named = [_model(model) for model in shown[:MODELS_NAMED]]
    if len(shown) > MODELS_NAMED:
        named.append(f"and {len(shown) - MODELS_NAMED} more")
    return ", ".join(named) + (f"; {idle} more downloaded, not loaded" if idle else "")


def _model(model: ModelSeen) -> str:
    return f"{model.id} ({model.context_length:,}-token context)" if model.context_length else model.id
