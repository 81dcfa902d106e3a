"""Claude Code itself, for the opt-in tests that drive it (tests/test_claude_code.py), as docs/doors.md connects it.

Claude Code is a native binary of a few hundred megabytes, not a test dependency: it is installed in a folder of
its own and named by TOOLBRIDGE_TEST_CLAUDE_CODE (its `claude` command); without it those tests are skipped:

    mkdir /work/claude-code && cd /work/claude-code && npm install @anthropic-ai/claude-code@2.1.197
    TOOLBRIDGE_TEST_CLAUDE_CODE=/work/claude-code/node_modules/.bin/claude .venv/bin/pytest tests/test_claude_code.py

Offline: a home of its own (no login, no settings of the machine's user), no telemetry, no update check.
"""

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.openai.schemas import content_text

CLAUDE_CODE = os.environ.get("TOOLBRIDGE_TEST_CLAUDE_CODE", "")
# Bounds a run that hangs; Claude Code answers a local gateway in about a second, and before issue 45 it retried
# a 502 or a 401 for three minutes.
RUN_TIMEOUT = 120
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)


def skip_without_claude_code() -> None:
    if not CLAUDE_CODE:
        pytest.skip("opt-in: set TOOLBRIDGE_TEST_CLAUDE_CODE to a `claude` command (npm @anthropic-ai/claude-code)",
                    allow_module_level=True)


@dataclass(frozen=True)
class Printed:
    """What `claude -p --output-format stream-json` printed: its events, and the result line's text."""

    events: list[dict[str, Any]]
    result: str
    is_error: bool

    def blocks(self, kind: str) -> list[str]:
        """The text of the answer's blocks of one kind (`thinking`, `text`), in order."""
        return [block.get(kind, "") for event in self.events if event.get("type") == "assistant"
                for block in event["message"]["content"] if block.get("type") == kind]


def claude(home: Path, base_url: str, key: str, model: str, prompt: str, *flags: str) -> Printed:
    """`claude -p PROMPT` in print mode, pointed at the gateway as docs/doors.md says; `home` is its own (its
    sessions, for `--continue`, live there, keyed by the working directory `home/work`)."""
    work = home / "work"
    work.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", ""), "HOME": str(home), "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_AUTH_TOKEN": key, "ANTHROPIC_MODEL": model, "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,
        "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    done = subprocess.run([CLAUDE_CODE, "-p", prompt, *flags, "--output-format", "stream-json", "--verbose"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False)
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    [result] = [event for event in events if event.get("type") == "result"] or [{"result": done.stderr}]
    return Printed(events, str(result.get("result", "")), bool(result.get("is_error", done.returncode != 0)))


def person_said(body: dict[str, Any]) -> str:
    """The person's last message as a scripted model reads it: Claude Code's `<system-reminder>` blocks left out."""
    messages = body["messages"]
    last = max(i for i, m in enumerate(messages) if m["role"] == "user")
    return _REMINDER.sub("", content_text(messages[last].get("content"))).strip()
