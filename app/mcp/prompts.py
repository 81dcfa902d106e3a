"""MCP prompts: each server's list, the commands they are typed as, asking a server for one (or for an
argument's completions, bounded, every failure told plainly), and their messages as OpenAI messages.

A prompt is typed in chat as `/name arg=value` (slash_commands.py). Its command is its name, or
`server.name` when two servers offer a prompt of that name; `server.name` always works.
"""

import base64
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp import Client, MCPError
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    GetPromptResult,
    ImageContent,
    Prompt,
    PromptArgument,
    PromptMessage,
    PromptReference,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from app.mcp.skills import Skill
from app.mcp.watching import list_pages
from app.openai.schemas import image_part
from app.openai.wire import ContentPart, JSONObject, Message

LISTED_AT_MOST = 1000


class PromptFailed(Exception):
    """A prompt (or its completions) could not be had from its server; the message says why, for the user."""


async def list_all_prompts(client: Client, refresh: bool = False) -> tuple[Prompt, ...]:
    async def prompts(cursor: str | None) -> tuple[list[Prompt], str | None]:
        page = await client.list_prompts(cursor=cursor, cache_mode="refresh" if refresh else "use")
        return page.prompts, page.next_cursor

    listed, _ = await list_pages(prompts, LISTED_AT_MOST)
    return tuple(listed)


async def get_prompt(client: Client, server: str, name: str, arguments: dict[str, str], timeout: float
                     ) -> GetPromptResult:
    """The prompt's messages. Raises: PromptFailed."""
    async with _asking(server, "prompt", timeout):
        return await client.get_prompt(name, arguments)
    raise AssertionError("unreachable: _asking raises every failure")


async def completions(client: Client, server: str, prompt: str, typed: tuple[str, str], context: dict[str, str],
                      timeout: float) -> list[str]:
    """The server's candidates for an argument's value (`typed`: the argument and its start); none when it
    offers no completions. Raises: PromptFailed."""
    if client.server_capabilities.completions is None:
        return []
    argument, partial = typed
    async with _asking(server, "completion", timeout):
        result = await client.complete(PromptReference(type="ref/prompt", name=prompt),
                                       {"name": argument, "value": partial}, context_arguments=context or None)
        return list(result.completion.values)
    raise AssertionError("unreachable: _asking raises every failure")


@asynccontextmanager
async def _asking(server: str, what: str, timeout: float) -> AsyncIterator[None]:
    """One request of the user's to a server, bounded; every failure raised as PromptFailed, told plainly."""
    try:
        with anyio.fail_after(timeout):
            yield
    except TimeoutError as exc:
        raise PromptFailed(f"MCP server '{server}' did not answer within {timeout:g} s.") from exc
    except MCPError as exc:
        raise PromptFailed(f"MCP server '{server}' refused the {what}: {exc.message}") from exc
    except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:  # its supervisor restarts it
        raise PromptFailed(f"MCP server '{server}' closed the connection; it is being restarted.") from exc


@dataclass(frozen=True)
class PromptEntry:
    command: str  # what follows the slash
    server: str
    prompt: Prompt
    skill_uri: str | None = None  # a skill's document (skills.py) rather than a prompt: `/name what to do`

    @property
    def required(self) -> list[str]:
        return [a.name for a in self.prompt.arguments or [] if a.required]

    @property
    def argument_names(self) -> list[str]:
        return [a.name for a in self.prompt.arguments or []]

    def usage(self) -> str:
        """`/name city=… [state=…]`; a skill's: `/name [what to do]`."""
        if self.skill_uri is not None:
            return f"/{self.command} [what to do]"
        parts = [f"/{self.command}"]
        for argument in self.prompt.arguments or []:
            parts.append(f"{argument.name}=…" if argument.required else f"[{argument.name}=…]")
        return " ".join(parts)

    def describe(self) -> JSONObject:
        """For GET /prompts."""
        return {"command": f"/{self.command}", "server": self.server,
                **self.prompt.model_dump(mode="json", by_alias=True, exclude_none=True)}


@dataclass(frozen=True)
class PromptBook:
    """Every server's prompts by the command that names them."""

    entries: Mapping[str, PromptEntry] = field(default_factory=dict)
    shared: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # a name offered by several: its commands

    def find(self, command: str) -> PromptEntry | None:
        return self.entries.get(command)

    def listed(self) -> list[PromptEntry]:
        """Each prompt once: by its name, or by its qualified names where servers share it."""
        return [e for e in self.entries.values() if e.command == e.prompt.name or e.prompt.name in self.shared]

    def select(self, keep: Callable[[str], bool]) -> "PromptBook":
        """The prompts of the servers `keep` keeps (a key's, a request's choice). A name shared with a server left
        out keeps its qualified command alone, as listed."""
        entries = {command: e for command, e in self.entries.items() if keep(e.server)}
        if len(entries) == len(self.entries):
            return self
        shared = {name: kept for name, commands in self.shared.items()
                  if (kept := tuple(command for command in commands if command in entries))}
        return PromptBook(entries, shared)


def build_prompt_book(prompts_by_server: Mapping[str, Sequence[Prompt]],
                      skills_by_server: Mapping[str, Sequence[Skill]] | None = None) -> PromptBook:
    """Every server's prompts, then its skills (a prompt of the same name on the same server wins), by command."""
    offered: dict[str, list[tuple[Prompt, str | None]]] = {
        server: [(prompt, None) for prompt in prompts] for server, prompts in prompts_by_server.items()}
    for server, skills in (skills_by_server or {}).items():
        names = {prompt.name for prompt, _ in offered.get(server, [])}
        offered.setdefault(server, []).extend((_skill_prompt(skill), skill.uri) for skill in skills
                                              if skill.name not in names)
    servers_of: dict[str, list[str]] = {}
    for server, listed in offered.items():
        for prompt, _ in listed:
            servers_of.setdefault(prompt.name, []).append(server)
    entries: dict[str, PromptEntry] = {}
    shared: dict[str, tuple[str, ...]] = {}
    for server, listed in offered.items():
        for prompt, uri in listed:
            qualified = f"{server}.{prompt.name}"
            if len(set(servers_of[prompt.name])) == 1:
                entries.setdefault(prompt.name, PromptEntry(prompt.name, server, prompt, uri))
            else:
                shared[prompt.name] = tuple(f"{s}.{prompt.name}" for s in dict.fromkeys(servers_of[prompt.name]))
            entries.setdefault(qualified, PromptEntry(qualified, server, prompt, uri))
    return PromptBook(entries, shared)


def _skill_prompt(skill: Skill) -> Prompt:
    """A skill as a prompt with one optional argument: `/release-notes for v2.1` is the skill, then the request."""
    return Prompt(name=skill.name, description=f"(skill) {skill.description}", arguments=[
        PromptArgument(name="request", description="What to do, following the skill.", required=False)])


async def skill_messages(client: Client, server: str, skill: tuple[str, str], timeout: float) -> GetPromptResult:
    """A skill's document (`skill`: its URI and the person's request after the slash command) as one user message:
    the instructions, then the request. Raises: PromptFailed."""
    uri, request = skill
    async with _asking(server, "skill", timeout):
        read = await client.read_resource(uri, cache_mode="bypass")
        text = "\n".join(part.text for part in read.contents if isinstance(part, TextResourceContents))
        if request:
            text = f"{text.rstrip()}\n\n---\n\n{request}"
        return GetPromptResult(messages=[PromptMessage(role="user", content=TextContent(type="text", text=text))])
    raise AssertionError("unreachable: _asking raises every failure")


# What `prompts/get` gives, named for the slash commands (app/chat/slash_commands.py), which hand it back here.
PromptResult = GetPromptResult


def has_images(result: GetPromptResult) -> bool:
    return any(isinstance(m.content, ImageContent) or (isinstance(m.content, EmbeddedResource) and isinstance(
        m.content.resource, BlobResourceContents) and (m.content.resource.mime_type or "").startswith("image/"))
        for m in result.messages)


def openai_messages(result: GetPromptResult, images: bool) -> list[Message]:
    """The prompt's messages as OpenAI chat messages: text as text, embedded resources as their text,
    images as image parts when the model sees images (else described). Consecutive messages of one role
    are joined, since many local models' chat templates require the roles to alternate."""
    joined: list[tuple[str, list[ContentPart]]] = []
    for message in result.messages:
        part = _part(message.content, images and message.role == "user")  # only user turns may hold images
        if joined and joined[-1][0] == message.role:
            joined[-1][1].append(part)
        else:
            joined.append((message.role, [part]))
    return [_flattened(role, parts) for role, parts in joined]


def _part(content: Any, images: bool) -> ContentPart:
    if isinstance(content, TextContent):
        return {"type": "text", "text": content.text}
    if isinstance(content, ImageContent):
        if images:
            return image_part(content.mime_type, content.data)
        return {"type": "text", "text": f"[an image ({content.mime_type}) the model cannot see]"}
    if isinstance(content, EmbeddedResource):
        resource = content.resource
        if isinstance(resource, TextResourceContents):
            return {"type": "text", "text": f"Resource {resource.uri}:\n{resource.text}"}
        if isinstance(resource, BlobResourceContents) and images and (resource.mime_type or "").startswith("image/"):
            return image_part(resource.mime_type, resource.blob)
        size = len(base64.b64decode(resource.blob or "", validate=False)) if resource.blob else 0
        return {"type": "text", "text": f"[resource {resource.uri}: {resource.mime_type or 'binary'}, {size} bytes]"}
    if isinstance(content, ResourceLink):
        return {"type": "text", "text": f"[resource {content.uri}: {content.name}]"}
    if isinstance(content, AudioContent):
        return {"type": "text", "text": f"[audio ({content.mime_type})]"}
    return {"type": "text", "text": str(content)}


def _flattened(role: str, parts: list[ContentPart]) -> Message:
    """Text only: one string (what every chat template reads); with images: the parts."""
    if all(part["type"] == "text" for part in parts):
        return {"role": role, "content": "\n\n".join(part.get("text", "") for part in parts)}
    return {"role": role, "content": parts}
