"""The start-up lines' words: the status page's address for a browser on this machine, and the model server's
models in a line."""

import pytest

from app.greeting import models_in_words, status_page_url
from app.upstream import ModelSeen


@pytest.mark.parametrize(
    ("host", "port", "url"),
    [
        ("127.0.0.1", 8000, "http://127.0.0.1:8000/"),
        ("0.0.0.0", 8000, "http://127.0.0.1:8000/"),  # every address: this machine's loopback opens it
        ("::", 9000, "http://[::1]:9000/"),
        ("::1", 8000, "http://[::1]:8000/"),
        ("gateway.lan", 8080, "http://gateway.lan:8080/"),
    ],
)
def test_the_status_page_is_given_at_an_address_a_browser_opens(host: str, port: int, url: str) -> None:
    assert status_page_url(host, port) == url


LOADED = ModelSeen("qwen3-8b", 8192, True)
IDLE = ModelSeen("gemma-3-12b", 131072, False)


@pytest.mark.parametrize(
    ("models", "words"),
    [
        ((LOADED, IDLE), "qwen3-8b (8,192-token context); 1 more downloaded, not loaded"),
        ((LOADED,), "qwen3-8b (8,192-token context)"),
        ((IDLE,), "none loaded (1 downloaded): load one in LM Studio, or let its JIT loading load it at the first "
                  "request"),
        ((ModelSeen("gguf", 16384, None),), "gguf (16,384-token context)"),  # llama.cpp
        ((ModelSeen("a", None, None), ModelSeen("b", None, None)), "a, b"),  # a server that says no context
        (tuple(ModelSeen(f"m{i}", None, None) for i in range(7)), "m0, m1, m2, m3, m4, and 2 more"),
        ((), "none listed"),
    ],
)
def test_the_models_are_said_in_one_line_the_loaded_ones_first(models: tuple[ModelSeen, ...], words: str) -> None:
    assert models_in_words(models) == words
