"""Prompt messages as OpenAI messages, and prompt names as commands."""

from mcp.types import (
    EmbeddedResource,
    GetPromptResult,
    ImageContent,
    Prompt,
    PromptMessage,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from app.mcp.prompts import build_prompt_book, has_images, openai_messages


def text(role: str, value: str) -> PromptMessage:
    return PromptMessage(role=role, content=TextContent(type="text", text=value))  # type: ignore[arg-type]


IMAGE = ImageContent(type="image", data="iVBORw0=", mime_type="image/png")


def test_roles_alternate_and_text_stays_a_string() -> None:
    result = GetPromptResult(messages=[text("user", "a"), text("user", "b"), text("assistant", "c"), text("user", "d")])
    assert openai_messages(result, images=False) == [
        {"role": "user", "content": "a\n\nb"}, {"role": "assistant", "content": "c"}, {"role": "user", "content": "d"},
    ]


def test_images_are_parts_for_a_vision_model_and_words_for_others() -> None:
    result = GetPromptResult(messages=[PromptMessage(role="user", content=IMAGE), text("user", "what is it?")])
    assert has_images(result)
    [seen] = openai_messages(result, images=True)
    assert seen["content"][0] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0="}}
    [blind] = openai_messages(result, images=False)
    assert blind["content"] == "[an image (image/png) the model cannot see]\n\nwhat is it?"
    # Only user turns may hold images, whatever the model sees.
    [assistant] = openai_messages(GetPromptResult(messages=[PromptMessage(role="assistant", content=IMAGE)]), True)
    assert isinstance(assistant["content"], str)


def test_resources_become_text() -> None:
    embedded = EmbeddedResource(type="resource", resource=TextResourceContents(uri="doc://a", text="body"))
    link = ResourceLink(type="resource_link", uri="doc://b", name="b")
    result = GetPromptResult(messages=[PromptMessage(role="user", content=embedded),
                                       PromptMessage(role="user", content=link)])
    assert openai_messages(result, images=True) == [
        {"role": "user", "content": "Resource doc://a:\nbody\n\n[resource doc://b: b]"}]


def test_a_name_two_servers_share_is_reached_by_server_only() -> None:
    book = build_prompt_book({"a": [Prompt(name="review"), Prompt(name="plan")], "b": [Prompt(name="review")]})
    assert book.find("review") is None and book.shared == {"review": ("a.review", "b.review")}
    assert book.find("plan") is not None and book.find("a.plan") is not None  # the qualified name always works
    assert [entry.command for entry in book.listed()] == ["a.review", "plan", "b.review"]  # in config order


def test_a_choice_of_servers_keeps_their_prompts_alone() -> None:
    book = build_prompt_book({"a": [Prompt(name="review"), Prompt(name="plan")], "b": [Prompt(name="review")]})
    assert book.select(lambda server: True) is book
    only_b = book.select(lambda server: server == "b")
    assert [entry.command for entry in only_b.listed()] == ["b.review"] and only_b.find("plan") is None
    assert only_b.shared == {"review": ("b.review",)}
    assert book.select(lambda server: False).listed() == []
