"""What a model server's prompt cache can keep (LM Studio, llama.cpp: the longest start a prompt shares with the one
before): the gateway puts nothing ahead of the conversation that changes from one request to the next. Two
conversations' first requests, whole and streamed, reach the upstream with the same tools, in the same order, and
the same system message; only the conversation differs. (A follow-up past the tool budget keeps the tools of the
request before it: tests/chat/offer/test_tool_budget.py.)"""

import json

from tests.conftest import Gateway
from tests.support.fake_upstream import FakeUpstream, Turn

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}  # as Open WebUI sends its own


def test_nothing_ahead_of_the_conversation_changes_between_requests(gateway: Gateway, upstream: FakeUpstream) -> None:
    sent = []
    for question, stream in (("What is 2 + 3?", False), ("Echo hello back to me.", True),
                             ("How is the weather in Oslo?", False)):
        upstream.script(Turn(content="ok"))
        reply = gateway.client().chat.completions.create(model="m", stream=stream,
                                                         messages=[SYSTEM, {"role": "user", "content": question}])
        text = "".join(c.choices[0].delta.content or "" for c in reply if c.choices) if stream else \
            reply.choices[0].message.content  # type: ignore[union-attr]
        assert text == "ok"
        [request] = upstream.chat_requests()
        sent.append(request)
    tools = {json.dumps(request["tools"]) for request in sent}
    systems = {json.dumps(request["messages"][0]) for request in sent}
    assert len(tools) == 1 and len(sent[0]["tools"]) > 10
    assert len(systems) == 1 and sent[0]["messages"][0]["role"] == "system"
    assert sent[0]["messages"][0]["content"].startswith(SYSTEM["content"])  # the client's words first, then the hint
    assert [request["messages"][1:] for request in sent] == [[{"role": "user", "content": q}] for q in
                                                             ("What is 2 + 3?", "Echo hello back to me.",
                                                              "How is the weather in Oslo?")]
