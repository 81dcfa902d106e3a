"""Large answers from a stdio MCP server (audit N9): the seconds and gateway CPU one call takes, the slowest
/health answer meanwhile (a frozen event loop shows there), and the gateway's memory after it.

The gateway runs as `toolbridge` with tests/support/mcp_servers/bulky.py, whose `big` tool returns as many
characters as asked; calls go through the status page's playground. `--message-mb` sets
TOOLBRIDGE_MCP_MESSAGE_MB (answers over it fail their call); `--source DIR` runs the gateway from another
checkout (`python -m app` with DIR on PYTHONPATH), for before/after figures.

    .venv/bin/python -m bench.big_results [--message-mb 64] [--source DIR]
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

import httpx
import psutil

from bench.hostile_inputs import start_gateway, wait_ready, while_probing_health

BULKY = Path(__file__).parent.parent / "tests" / "support" / "mcp_servers" / "bulky.py"
SIZES_MB = (1, 8, 15, 32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--message-mb", type=float, default=None, help="TOOLBRIDGE_MCP_MESSAGE_MB")
    parser.add_argument("--source", type=Path, default=None, help="a checkout to run the gateway from")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {"bulky": {"command": sys.executable, "args": [str(BULKY)],
                                                               "timeout": 300}}}))
        settings = {"TOOLBRIDGE_STATE_URL": "none", "TOOLBRIDGE_LOG_LEVEL": "warning"}
        if args.message_mb is not None:
            settings["TOOLBRIDGE_MCP_MESSAGE_MB"] = str(args.message_mb)
        gateway, base = start_gateway(config, args.source, settings)
        try:
            wait_ready(base, 1)
            process = psutil.Process(gateway.pid)
            # One server: its tools may go unprefixed (TOOLBRIDGE_TOOL_PREFIX=auto); ask the gateway the name.
            tool = httpx.get(f"{base}/tools", timeout=30).json()["data"][0]["function"]["name"]
            print(f"{'answer':>8} {'outcome':>8} {'call s':>7} {'gateway CPU s':>14} {'slowest /health ms':>19} "
                  f"{'RSS after MB':>13}")
            for size in SIZES_MB:
                cpu = sum(process.cpu_times()[:2])
                outcome, seconds, slowest = measure(base, tool, size * 1_000_000)
                used = sum(process.cpu_times()[:2]) - cpu
                print(f"{size:>5} MB {outcome:>8} {seconds:>7.2f} {used:>14.2f} {slowest * 1000:>19.0f} "
                      f"{process.memory_info().rss / 1e6:>13.0f}", flush=True)
        finally:
            gateway.terminate()
            gateway.wait(timeout=60)


def measure(base: str, tool: str, size: int) -> tuple[str, float, float]:
    """The call's outcome and seconds, and the slowest /health answer while it ran."""

    def call() -> str:
        response = httpx.post(f"{base}/ui/playground", json={"tool": tool, "arguments": {"size": size, "tag": "t"}},
                              timeout=600)
        if response.status_code != 200:
            return str(response.status_code)
        return json.loads(response.json()["content"])["status"]

    return while_probing_health(base, call)


if __name__ == "__main__":
    main()
