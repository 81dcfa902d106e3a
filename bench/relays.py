"""Two relays with no features, to measure toolbridge against what a few lines of Python cost.

- `naive`: FastAPI and an httpx.AsyncClient, the relay most people would write in 30 lines.
- `floor`: raw ASGI and aiohttp, about as little as Python can do per request and per chunk.
- `fastapi`: the floor's relay as a FastAPI route: what the framework alone costs a request, beside the floor
  (toolbridge is a FastAPI app; its chat route skips the router but not FastAPI's and Starlette's middlewares).
- `least`: the least an MCP gateway can do as a FastAPI app on the mcp SDK, its chat taken in a middleware before
  FastAPI's routing as toolbridge's is: the body parsed, mcp-server-time's tools added, the upstream's answer read,
  the tool calls it asks for made through the SDK and the answer sent again until the model answers; nothing else
  (no checks, no limits, no streams read: those are relayed as they come). Where toolbridge's figures would be
  with none of its features (issue 47).

    python -m bench.relays naive --port 9002 --upstream http://127.0.0.1:9001/v1
"""

import argparse
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import uvicorn

from bench.upstream import read_body


def naive_app(upstream: str) -> Any:
    import httpx
    from fastapi import FastAPI, Request
    from fastapi.responses import Response, StreamingResponse

    app = FastAPI()
    client = httpx.AsyncClient(base_url=upstream, timeout=60)

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        body = await request.json()
        sent = client.build_request("POST", "/chat/completions", json=body)
        response = await client.send(sent, stream=True)
        if body.get("stream"):
            return StreamingResponse(response.aiter_raw(), media_type="text/event-stream")
        content = await response.aread()
        return Response(content, response.status_code, media_type="application/json")

    return app


def fastapi_app(upstream: str) -> Any:
    import aiohttp
    from fastapi import FastAPI, Request
    from fastapi.responses import Response, StreamingResponse

    app = FastAPI()
    session: aiohttp.ClientSession | None = None
    url = upstream + "/chat/completions"

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        nonlocal session
        session = session or aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=200))
        response = await session.post(url, data=await request.body(), headers={"content-type": "application/json"})
        media_type = response.headers["content-type"]
        if media_type.startswith("text/event-stream"):
            async def relayed() -> Any:
                async with response:
                    async for part in response.content.iter_any():
                        yield part
            return StreamingResponse(relayed(), response.status, media_type=media_type)
        async with response:
            return Response(await response.read(), response.status, media_type=media_type)

    return app


def least_app(upstream: str) -> Any:
    import aiohttp
    import orjson
    from fastapi import FastAPI
    from mcp import Client, StdioServerParameters

    url = upstream + "/chat/completions"
    json_type = {"content-type": "application/json"}
    held: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        server = StdioServerParameters(command=str(Path(sys.executable).parent / "mcp-server-time"))
        async with Client(server) as client, aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=200)) as session:
            listed = await client.list_tools()
            held["tools"] = [{"type": "function", "function": {
                "name": tool.name, "description": tool.description or "", "parameters": tool.input_schema}}
                for tool in listed.tools]
            held["client"], held["session"] = client, session
            yield

    async def answered(body: dict[str, Any]) -> bytes:
        """The model's answer once it asks for no more tools."""
        client, session = held["client"], held["session"]
        messages = body["messages"] = list(body["messages"])
        while True:
            async with session.post(url, data=orjson.dumps(body), headers=json_type) as response:
                answer = orjson.loads(await response.read())
            message = answer["choices"][0]["message"]
            if not message.get("tool_calls"):
                return orjson.dumps(answer)
            messages.append(message)
            for call in message["tool_calls"]:
                result = await client.call_tool(call["function"]["name"],
                                                orjson.loads(call["function"]["arguments"] or "{}"))
                text = "".join(part.text for part in result.content if part.type == "text")
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})

    class ChatLane:
        """The chat taken before FastAPI's routing, as toolbridge's own lane takes it (app/api/chat_lane.py)."""

        def __init__(self, app: Any) -> None:
            self.app = app

        async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http" or scope["path"] != "/v1/chat/completions" or scope["method"] != "POST":
                await self.app(scope, receive, send)
                return
            body = orjson.loads(await read_body(receive))
            body["tools"] = [*(body.get("tools") or []), *held["tools"]]
            if not body.get("stream"):
                answer = await answered(body)
                await send({"type": "http.response.start", "status": 200, "headers": [
                    (b"content-type", b"application/json"), (b"content-length", str(len(answer)).encode())]})
                await send({"type": "http.response.body", "body": answer})
                return
            async with held["session"].post(url, data=orjson.dumps(body), headers=json_type) as response:
                await send({"type": "http.response.start", "status": response.status,
                            "headers": [(b"content-type", response.headers["content-type"].encode())]})
                async for part in response.content.iter_any():
                    await send({"type": "http.response.body", "body": part, "more_body": True})
                await send({"type": "http.response.body", "body": b""})

    app = FastAPI(lifespan=lifespan)
    app.add_middleware(ChatLane)
    return app


def floor_app(upstream: str) -> Any:
    import aiohttp

    session: aiohttp.ClientSession | None = None
    url = upstream + "/chat/completions"

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        nonlocal session
        if scope["type"] != "http":
            return
        session = session or aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=200))
        body = await read_body(receive)
        async with session.post(url, data=body, headers={"content-type": "application/json"}) as response:
            headers = [(b"content-type", response.headers["content-type"].encode())]
            await send({"type": "http.response.start", "status": response.status, "headers": headers})
            async for part in response.content.iter_any():
                await send({"type": "http.response.body", "body": part, "more_body": True})
            await send({"type": "http.response.body", "body": b""})

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["naive", "floor", "fastapi", "least"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    args = parser.parse_args()
    apps = {"naive": naive_app, "floor": floor_app, "fastapi": fastapi_app, "least": least_app}
    app = apps[args.kind](args.upstream)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
