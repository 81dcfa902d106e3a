"""Unknown fields in the files toolbridge reads (mcp.json, the keys file), said in one phrase with the nearest field
toolbridge knows. A field in the wrong place is the likely mistake (`per_key` beside `oauth` instead of inside it),
so the same name at another level of the file is looked for before a close spelling where the field is."""

import difflib
import json
import re
from collections.abc import Mapping, Sequence

CLOSE_ENOUGH = 0.75  # difflib's ratio: "confim" and "confirm" are 0.92, "enviroment" and "env" 0.46
LISTED_UP_TO = 6  # a level with no more fields than this lists them when none is near
SHOWN_CHARS = 64
_SEPARATORS = re.compile(r"[-_\s]")


def unknown_field(
    name: str, here: Sequence[str], elsewhere: Mapping[str, Sequence[str]] | None = None, *, named: bool = True
) -> str:
    """`unknown field "confim" (did you mean "confirm"?)`. `here` are the fields known where it is, in the spelling
    the docs use first; `elsewhere` maps how a field of another level is written from here (a format such as
    '"oauth.{}"') to that level's fields. With `named` false, the name is repeated only when a known field is near:
    an unknown field of the keys file may be a key written in the wrong place."""
    hint = nearest_field(name, here, elsewhere or {})
    said = f"unknown field {shown(name)}" if named or hint else "an unknown field, not repeated in case it is a key"
    if hint:
        return f"{said} (did you mean {hint}?)"
    if len(here) <= LISTED_UP_TO:
        return f"{said} (known: {', '.join(here)})"
    return said


def nearest_field(name: str, here: Sequence[str], elsewhere: Mapping[str, Sequence[str]]) -> str | None:
    """The known field a person most likely meant, written as from where `name` is; None: none is near."""
    levels = [('"{}"', here), *elsewhere.items()]
    folded = _folded(name)
    for form, fields in levels:  # the same word in another spelling (perKey, per-key) or at another level
        for field in fields:
            if _folded(field) == folded:
                return form.format(field)
    for form, fields in levels:
        spellings = {_folded(field): field for field in reversed(fields)}  # the first spelling of each word wins
        close = difflib.get_close_matches(folded, list(spellings), n=1, cutoff=CLOSE_ENOUGH)
        if close:
            return form.format(spellings[close[0]])
    return None


def shown(name: str) -> str:
    """A field's name as a message quotes it: escaped (one line, whatever the file holds) and bounded."""
    return json.dumps(name if len(name) <= SHOWN_CHARS else f"{name[:SHOWN_CHARS]}...")


def _folded(name: str) -> str:
    return _SEPARATORS.sub("", name).lower()
