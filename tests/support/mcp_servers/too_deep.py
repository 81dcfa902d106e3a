"""A stdio MCP server written without the SDK, whose tools/list answer nests deeper than a JSON parser allows.

It answers `initialize` as a 2025 server does and everything else it does not know with "method not found".
"""

import json
import sys

DEPTH = 5_000


def answer(request_id: object, result: str) -> None:
    sys.stdout.write(f'{{"jsonrpc": "2.0", "id": {json.dumps(request_id)}, "result": {result}}}\n')
    sys.stdout.flush()


for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    if message["method"] == "initialize":
        answer(message["id"], json.dumps({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                                          "serverInfo": {"name": "too-deep", "version": "1"}}))
    elif message["method"] == "tools/list":
        schema = '{"type": "object", "properties": {"x": ' + '{"type": "array", "items": ' * DEPTH + "{}" + "}" * DEPTH
        answer(message["id"], '{"tools": [{"name": "deep", "inputSchema": ' + schema + "}}]}")
    else:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"],
                                     "error": {"code": -32601, "message": "method not found"}}) + "\n")
        sys.stdout.flush()
