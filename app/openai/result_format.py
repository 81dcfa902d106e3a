"""A tool result as the model reads it (TOOLBRIDGE_RESULT_FORMAT): one flat JSON envelope, or plain text,
capped in size; the system hint that says how to read it; and an earlier result written again, shortened or
left out, for conversation memory.

    {"status": "success" | "error", "data": ..., "meta": {...}}

`meta` is there only when it tells the model something: `truncated` (what was cut, how to get the rest),
`attachments`, or a `note`. The tool's name, server and duration are not: the eval measured them as
tokens that cost small models accuracy (docs/eval.md); the logs and the trace carry them.

No MCP types here: app/mcp/results.py makes an MCP result into `data` and `meta` and writes it with this
module, and the chat wing (memory, the system hint) writes results again without the SDK.
"""

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from app.openai.wire import JSONObject, JSONValue
from app.settings.vocabularies import ResultFormat

_SYSTEM_HINTS = {
    "envelope": (
        "Tool results are JSON objects. Read \"status\" first. If it is \"error\", read data.message: fix "
        "the arguments and call the tool again, or tell the user what failed. Never invent a tool's result."
    ),
    "text": (
        "A tool result that starts with \"Error:\" means the call failed: fix the arguments and call the "
        "tool again, or tell the user what failed. Never invent a tool's result."
    ),
}
CUT_HINT = (
    "The result was too long for the model and was cut. To see the rest, ask for less: a narrower "
    "query, fewer fields, a smaller limit, or the next page."
)


@dataclass(frozen=True)
class RenderOptions:
    result_format: ResultFormat = "envelope"
    max_chars: int = 25_000


def system_hint(result_format: ResultFormat) -> str:
    """The short instruction added to the system message when tools are offered."""
    return _SYSTEM_HINTS[result_format]


def recorded_result(value: JSONValue, failed: bool, cut: bool, options: RenderOptions) -> str:
    """An earlier call's result as the model saw it, rebuilt from what a client kept of it (the value its
    trace showed): the same envelope or text, and a note when only the start of it was kept."""
    if options.result_format == "text":
        text = value if isinstance(value, str) else compact_json(value)
        return cap_text(f"Error: {text}" if failed else text, options.max_chars)
    if failed:
        return write_envelope("error", {"message": value}, options, {})
    meta: JSONObject = {"truncated": {"hint": "Only the start of this earlier result was kept."}} if cut else {}
    return write_envelope("success", value, options, meta)


def shortened_result(content: str, limit: int, result_format: ResultFormat) -> str:
    """A result the model saw, cut to `limit` characters the way a long result is cut when it arrives:
    whole items or characters of the envelope's data, said in meta.truncated; text gets the cut line."""
    if len(content) <= limit:
        return content
    try:
        envelope = json.loads(content) if result_format == "envelope" else None
    except ValueError:
        envelope = None
    if not isinstance(envelope, dict) or "data" not in envelope:
        return cap_text(content, limit)
    return _cut(envelope, limit)


def omitted_result(result_format: ResultFormat) -> str:
    """What stands for an earlier result left out to fit the model's context: one line it can act on."""
    note = "This earlier result was left out to fit the model's context; call the tool again if it is needed."
    return compact_json({"status": "omitted", "meta": {"note": note}}) if result_format == "envelope" else note


def write_envelope(status: str, data: JSONValue, options: RenderOptions, meta: Mapping[str, JSONValue]) -> str:
    """The envelope as the model reads it, cut to `options.max_chars` when longer (said in meta.truncated)."""
    envelope: JSONObject = {"status": status, "data": data, **({"meta": dict(meta)} if meta else {})}
    text = compact_json(envelope)
    return text if len(text) <= options.max_chars else _cut(envelope, options.max_chars)


def cap_text(text: str, limit: int) -> str:
    """Plain text cut to `limit` characters, ending with a line that says so and how to get the rest."""
    if len(text) <= limit:
        return text
    marker = f"\n[cut: {len(text)} characters in all. {CUT_HINT}]"
    return text[: max(0, limit - len(marker))] + marker


def compact_json(value: object) -> str:
    """JSON as the model gets it: no spaces, no escapes for non-ASCII text (each costs tokens)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _cut(envelope: JSONObject, limit: int) -> str:
    """Cuts whole list items where the data has them, else characters; always valid JSON within `limit`."""
    data = envelope["data"]
    if isinstance(data, list):
        return _fit_items(envelope, data, limit, within=None)
    if isinstance(data, dict):
        lists = {key: value for key, value in data.items() if isinstance(value, list) and value}
        if lists:
            longest = max(lists, key=lambda key: len(compact_json(lists[key])))
            return _fit_items(envelope, lists[longest], limit, within=(data, longest))
        texts = {key: value for key, value in data.items() if isinstance(value, str)}
        if texts:
            longest = max(texts, key=lambda key: len(texts[key]))
            return _fit_chars(envelope, texts[longest], limit, within=(data, longest))
    return _fit_chars(envelope, data if isinstance(data, str) else compact_json(data), limit, within=None)


# Where a cut list or text sits: the data object and its key; None: it is the data itself.
Within = tuple[JSONObject, str] | None


def _fit_items(envelope: JSONObject, items: list[JSONValue], limit: int, within: Within) -> str:
    def build(kept: int) -> str:
        data: JSONValue = items[:kept] if within is None else {**within[0], within[1]: items[:kept]}
        truncated: JSONObject = {"kept_items": kept, "total_items": len(items), "hint": CUT_HINT}
        if within is not None:
            truncated["list"] = within[1]
        return _with_cut(envelope, data, truncated)

    best = _largest_fitting(len(items) - 1, lambda kept: len(build(kept)) <= limit)
    if best is None:
        return _fit_chars(envelope, compact_json(envelope["data"]), limit, within=None)
    return build(best)


def _fit_chars(envelope: JSONObject, text: str, limit: int, within: Within) -> str:
    """Cuts the data's text (or its longest text field, keeping the object) to the largest part that fits."""

    def build(kept: int) -> str:
        truncated: JSONObject = {"kept_chars": kept, "total_chars": len(text), "hint": CUT_HINT}
        if within is not None:
            truncated["field"] = within[1]
        cut: JSONValue = text[:kept] if within is None else {**within[0], within[1]: text[:kept]}
        return _with_cut(envelope, cut, truncated)

    best = _largest_fitting(len(text), lambda kept: len(build(kept)) <= limit)
    return build(best or 0)[:limit] if best is None else build(best)


def _with_cut(envelope: JSONObject, data: JSONValue, truncated: JSONObject) -> str:
    """The envelope with its data cut, meta.truncated saying how."""
    meta = envelope.get("meta")
    return compact_json({**envelope, "data": data, "meta": {**(meta if isinstance(meta, dict) else {}),
                                                            "truncated": truncated}})


def _largest_fitting(upper: int, fits: Callable[[int], bool]) -> int | None:
    """Binary search for the largest n in [0, upper] with fits(n); serialisation makes length non-linear."""
    if upper < 0 or not fits(0):
        return None
    low, high = 0, upper
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low
