"""Codex CLI, for the opt-in tests that drive it as a person does (tests/test_codex.py).

Codex is an npm package with a native binary of 400 MB, far too large for the project's dependencies, so the tests
run it only when TOOLBRIDGE_TEST_CODEX names its command (installed outside the repository):

    npm install --prefix /work/codex-npm @openai/codex@0.171.0
    TOOLBRIDGE_TEST_CODEX=/work/codex-npm/node_modules/.bin/codex .venv/bin/pytest tests/test_codex.py -n 0

Each test's Codex has a home of its own (CODEX_HOME: its config.toml, as docs/doors.md gives it, and its
sessions, which `codex exec resume --last` continues). Offline: Codex reaches nothing but the gateway.
"""

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

CODEX = os.environ.get("TOOLBRIDGE_TEST_CODEX", "")
VERSION = "0.171.0"  # the version the audit drove and the tests were written against
RUN_TIMEOUT = 180.0  # one `codex exec`, its retries included, on two busy cores


def skip_without_codex() -> None:
    if not CODEX:
        pytest.skip(f"opt-in: set TOOLBRIDGE_TEST_CODEX to a codex command (npm @openai/codex@{VERSION})",
                    allow_module_level=True)


@dataclass(frozen=True)
class Printed:
    """What `codex exec` printed: the final message on stdout (what scripts and `-o` take), and on stderr the
    transcript the person reads as it goes (the trace, the agent's messages, errors)."""

    answer: str
    transcript: str
    code: int


class Codex:
    """Codex CLI pointed at a gateway, with the config.toml of docs/doors.md, in a home and a workdir of its own."""

    def __init__(self, home: Path, gateway_url: str, key: str, *, retries: bool = True) -> None:
        self.home, self.workdir, self.key = home / "codex-home", home / "work", key
        self.home.mkdir(parents=True)
        self.workdir.mkdir()
        # Without retries Codex gives up at once; with its defaults it retries a 502 five times (27 s).
        no_retries = "" if retries else "request_max_retries = 0\nstream_max_retries = 0\n"
        (self.home / "config.toml").write_text(
            'model = "qwen3-8b"\nmodel_provider = "toolbridge"\nweb_search = "disabled"\n'
            f'[model_providers.toolbridge]\nname = "toolbridge"\nbase_url = "{gateway_url}/v1"\n'
            f'wire_api = "responses"\nenv_key = "TOOLBRIDGE_KEY"\n{no_retries}')

    def exec(self, prompt: str) -> Printed:
        return self._run(["exec", "--skip-git-repo-check", prompt])

    def resume(self, prompt: str) -> Printed:
        """The next turn of the last session, as `codex exec resume --last` sends it."""
        return self._run(["exec", "--skip-git-repo-check", "resume", "--last", prompt])

    def _run(self, arguments: list[str]) -> Printed:
        env = {**os.environ, "CODEX_HOME": str(self.home), "TOOLBRIDGE_KEY": self.key}
        for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CODEX_API_KEY"):
            env.pop(name, None)
        done = subprocess.run([CODEX, *arguments], cwd=self.workdir, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=RUN_TIMEOUT)
        return Printed(done.stdout, done.stderr, done.returncode)
