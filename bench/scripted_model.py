"""A rule-based stand-in for LM Studio, for demos and benchmarks where no real model can run.

It streams exactly as the test upstream does (LM Studio's quirks included) and decides like a
tool-using model would, by simple rules:
- after tool results, it answers with them ("It is 2026-11-22T02:30:00+00:00 in UTC.");
- told "call TOOL with {json}", it calls that tool with those arguments;
- asked about the time with a `*get_current_time` tool offered, it calls that tool;
- otherwise it answers `--words` words.

    python -m bench.scripted_model --port 1234
"""

import argparse
import json
import re
import zoneinfo
from typing import Any

import uvicorn

from tests.support.fake_upstream import Call, FakeUpstream, Turn


def decide(body: dict[str, Any], words: int) -> Turn:
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return Turn(content=_answer_from(last.get("content") or ""))
    text = str(last.get("content") or "")
    time_tool = next(
        (t["function"]["name"] for t in body.get("tools") or [] if t["function"]["name"].endswith("get_current_time")),
        None,
    )
    asked = re.match(r"call (\S+) with (\{.*\})\s*$", text, re.DOTALL)
    if asked and body.get("tool_choice") != "none":
        return Turn(calls=[Call(asked.group(1), asked.group(2))])
    if time_tool and body.get("tool_choice") != "none" and re.search(r"\btime\b", text, re.IGNORECASE):
        zone = re.search(r"\bin ([A-Z][A-Za-z_/]+)", text)
        return Turn(calls=[Call(time_tool, {"timezone": _iana_zone(zone.group(1)) if zone else "UTC"})])
    return Turn(content=" ".join(["word"] * words))


def _iana_zone(place: str) -> str:
    """"Tokyo" -> "Asia/Tokyo", as a real model would write it; names already in that form stay."""
    if "/" in place or place == "UTC":
        return place
    return next((zone for zone in sorted(zoneinfo.available_timezones()) if zone.endswith(f"/{place}")), place)


def _answer_from(result: str) -> str:
    try:
        data = json.loads(result)
    except ValueError:
        return f"The tool said: {result[:300]}"
    if isinstance(data, dict) and isinstance(data.get("data"), dict):  # toolbridge's result envelope
        data = data["data"]
    if isinstance(data, dict) and "datetime" in data:
        return f"It is {data['datetime']} in {data.get('timezone', 'UTC')}."
    return f"The tool said: {result[:300]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=1234)
    parser.add_argument("--words", type=int, default=40, help="length of a plain answer")
    args = parser.parse_args()
    upstream = FakeUpstream(default=lambda body: decide(body, args.words), record=False)
    uvicorn.run(upstream.app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
