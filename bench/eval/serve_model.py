"""A llama.cpp OpenAI-compatible server with the eval's chat handler registered.

    python -m bench.eval.serve_model --model PATH.gguf --port 8080
"""

import argparse

import uvicorn
from llama_cpp.server.app import create_app
from llama_cpp.server.settings import ModelSettings, ServerSettings

from bench.eval.handler import FORMAT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--context", type=int, default=8192)
    args = parser.parse_args()
    model = ModelSettings(model=args.model, model_alias="eval-model", chat_format=FORMAT, n_ctx=args.context,
                          n_threads=1, n_threads_batch=1, logits_all=False, verbose=False)
    app = create_app(server_settings=ServerSettings(host="127.0.0.1", port=args.port), model_settings=[model])
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
