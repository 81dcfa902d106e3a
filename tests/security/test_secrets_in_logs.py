"""Secrets in the log (issue 9's and issue 31's audits): the SDK's sign-in failures quote the token endpoint's
answer in their tracebacks, and a key first written into a reloaded keys file was not yet among the secrets the log
redacts. Each is run in a process of its own, logging as the gateway logs."""

import subprocess
import sys
from pathlib import Path

LOG_THE_SDKS_SIGN_IN_FAILURES = """
import logging
from pydantic import BaseModel
from app.logging import configure_logging
configure_logging("json", "info")
class Token(BaseModel):
    expires_in: int
try:
    Token.model_validate({{"access_token": "at-TOKEN-CANARY", "expires_in": "never"}})
except Exception:
    logging.getLogger("mcp.client.auth.oauth2").exception("Invalid refresh response")
logging.getLogger("mcp.client.auth.oauth2").warning("Token refresh failed: 400")
"""


def test_the_sdks_sign_in_tracebacks_never_reach_the_log_and_its_plain_warnings_do() -> None:
    # The SDK's refresh logs pydantic's error, whose text quotes the token endpoint's answer (oauth2.py 560).
    script = LOG_THE_SDKS_SIGN_IN_FAILURES.format()
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert "Token refresh failed: 400" in result.stderr
    assert "TOKEN-CANARY" not in result.stderr and "Invalid refresh response" not in result.stderr


LOG_A_RELOADED_KEY = """
import json, pathlib, structlog
from app.access.key_ring import KeyRing
from app.logging import configure_logging
path = pathlib.Path({path!r})
path.write_text(json.dumps({{"keys": {{"sk-FIRST-CANARY": {{"servers": "*"}}}}}}))
ring = KeyRing([], path, {{}})
configure_logging("json", "info", secrets=ring.secrets())
path.write_text(json.dumps({{"keys": {{"sk-FIRST-CANARY": {{"servers": "*"}}, "sk-LATER-CANARY": {{"servers": []}}}}}}))
ring.reload()
structlog.get_logger("test").info("careless", said="sk-FIRST-CANARY and sk-LATER-CANARY")
"""


def test_a_key_first_written_into_a_reloaded_keys_file_is_redacted_from_the_log_too(tmp_path: Path) -> None:
    script = LOG_A_RELOADED_KEY.format(path=str(tmp_path / "keys.json"))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert "careless" in result.stderr and "keys_file_reloaded" in result.stderr
    assert "FIRST-CANARY" not in result.stderr and "LATER-CANARY" not in result.stderr
