"""A server's skills (issue 49): the SKILL.md documents it offers as `skill://{name}/SKILL.md` resources (the
convention of the Skills over MCP interest group's reference implementation, modelcontextprotocol/experimental-ext-
skills), offered to the model as one tool, `{server}__load_skill`, whose description lists them: the model loads a
skill's instructions when a task calls for them (progressive disclosure), and the gateway reads the resource.

Found in the server's resource listing (resources.py), so a skill added or removed reaches the model when the
server says its resources changed. The status page lists them (GET /ui/skills).
"""

import re
from dataclasses import dataclass

from mcp.types import Tool, ToolAnnotations

from app.mcp.resources import ResourceListing
from app.openai.wire import JSONObject

LOAD_SKILL = "load_skill"  # the tool's name before the usual prefix: `{server}__load_skill`
_SKILL = re.compile(r"^skill://(?P<name>[A-Za-z0-9][\w.-]{0,63})/SKILL\.md$")
_DESCRIPTION_CHARS = 990
_LINE_CHARS = 160


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    uri: str


def skills_of(listing: ResourceListing | None) -> tuple[Skill, ...]:
    """The skills among a server's listed resources, each once, in the order listed."""
    found: dict[str, Skill] = {}
    for resource in listing.resources if listing is not None else ():
        if (match := _SKILL.match(str(resource.uri))) is not None:
            text = resource.description or resource.title or resource.name or ""
            found.setdefault(match["name"], Skill(match["name"], " ".join(text.split()), str(resource.uri)))
    return tuple(found.values())


def skill_tool(server: str, skills: tuple[Skill, ...]) -> Tool:
    """The tool that loads one of the server's skills by name; its description says when each is for."""
    head = (f"Load a skill of MCP server '{server}': step-by-step instructions for a kind of task. Load the one that "
            "fits before doing such a task, then follow it. Skills:")
    lines, room = [head], _DESCRIPTION_CHARS - len(head)
    for skill in skills:
        line = f"- {skill.name}: {skill.description}"[:_LINE_CHARS]
        if len(line) + 1 > room:
            lines.append(f"...and {len(skills) - len(lines) + 1} more.")
            break
        lines.append(line)
        room -= len(line) + 1
    schema: JSONObject = {"type": "object", "additionalProperties": False, "required": ["name"], "properties": {
        "name": {"type": "string", "enum": [skill.name for skill in skills], "description": "The skill to load."}}}
    return Tool(name=LOAD_SKILL, description="\n".join(lines), input_schema=schema,
                annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))


def skill_uri(arguments: JSONObject) -> str:
    """The resource a call of `load_skill` reads (its arguments checked against the tool's schema first)."""
    return f"skill://{arguments['name']}/SKILL.md"
