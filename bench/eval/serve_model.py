"""A llama.cpp OpenAI-compatible server with the eval's chat handler registered.

    python -m bench.eval.serve_model --model PATH.gguf --port 8080 [--context N --report-context]

llama-cpp-python's server does not say what its context is, so a gateway in front of it applies no context
budget. With --report-context it also answers `GET /api/v1/models` as LM Studio does (the model loaded, with
the context it was loaded with), so the gateway sizes its tools as it would in front of LM Studio.
"""

import argparse
from typing import Any

import uvicorn
from llama_cpp.server.app import create_app
from llama_cpp.server.settings import ModelSettings, ServerSettings

from bench.eval.handler import FORMAT

MODEL_ALIAS = "eval-model"


def lmstudio_models(context: int) -> dict[str, Any]:
    """LM Studio's `GET /api/v1/models` (0.4+, shared/notes/protocol-facts.md 4.1) for the one model served:
    loaded, with `context` as its loaded context and its maximum."""
    return {"models": [{
        "type": "llm", "key": MODEL_ALIAS, "display_name": MODEL_ALIAS, "format": "gguf",
        "max_context_length": context,
        "loaded_instances": [{"id": MODEL_ALIAS, "config": {"context_length": context}}],
        "capabilities": {"vision": False, "trained_for_tool_use": True},
    }]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--context", type=int, default=8192, help="the model's context window in tokens (n_ctx)")
    parser.add_argument("--report-context", action="store_true",
                        help="answer GET /api/v1/models as LM Studio does, with the context")
    args = parser.parse_args()
    model = ModelSettings(model=args.model, model_alias=MODEL_ALIAS, chat_format=FORMAT, n_ctx=args.context,
                          n_threads=1, n_threads_batch=1, logits_all=False, verbose=False)
    app = create_app(server_settings=ServerSettings(host="127.0.0.1", port=args.port), model_settings=[model])
    if args.report_context:
        app.add_api_route("/api/v1/models", lambda: lmstudio_models(args.context), methods=["GET"])
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
