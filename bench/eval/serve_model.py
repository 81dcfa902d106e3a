"""A llama.cpp OpenAI-compatible server with the eval's chat handler registered.

    python -m bench.eval.serve_model --model PATH.gguf --port 8080 [--context N --report-context]
        [--chat-template FILE.jinja]

llama-cpp-python's server does not say what its context is, so a gateway in front of it applies no context
budget. With --report-context it also answers `GET /api/v1/models` as LM Studio does (the model loaded, with
the context it was loaded with), so the gateway sizes its tools as it would in front of LM Studio.

With --chat-template the prompt is written by that Jinja template, as LM Studio and llama.cpp write it from the
model's own, instead of the eval's handler: a Gemma or Mistral template refuses roles it does not know, and a
request the template refuses is an error, as there.
"""

import argparse
from pathlib import Path
from typing import Any

import uvicorn
from llama_cpp.llama_chat_format import Jinja2ChatFormatter, register_chat_completion_handler
from llama_cpp.server.app import create_app
from llama_cpp.server.settings import ModelSettings, ServerSettings

from bench.eval.handler import FORMAT

MODEL_ALIAS = "eval-model"
TEMPLATE_FORMAT = "toolbridge-template"  # the --chat-template's handler


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
    parser.add_argument("--chat-template", help="a Jinja chat template that writes the prompt (not the eval's)")
    args = parser.parse_args()
    chat_format = FORMAT
    if args.chat_template:
        template = Path(args.chat_template).read_text()
        handler = Jinja2ChatFormatter(template, eos_token="<end_of_turn>", bos_token="<bos>").to_chat_handler()
        register_chat_completion_handler(TEMPLATE_FORMAT)(handler)
        chat_format = TEMPLATE_FORMAT
    model = ModelSettings(model=args.model, model_alias=MODEL_ALIAS, chat_format=chat_format, n_ctx=args.context,
                          n_threads=1, n_threads_batch=1, logits_all=False, verbose=False)
    app = create_app(server_settings=ServerSettings(host="127.0.0.1", port=args.port), model_settings=[model])
    if args.report_context:
        app.add_api_route("/api/v1/models", lambda: lmstudio_models(args.context), methods=["GET"])
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
