"""How often app/ says `dict[str, Any]` (itself or through an alias) and `Any`, by package and by module.

    python -m bench.type_counts [--source DIR] [--top N]

Counted from each module's AST (comments and docstrings never count; `--source DIR` counts another
checkout's app/):

- *`dict[str, Any]`*: every subscript `dict[str, Any]` in the code, wherever it is: annotations, an alias's
  definition, `cast(...)`, a TypeVar's bound. `Dict[str, Any]`, `typing.Dict[...]` and `typing.Any` count too;
  a key type other than `str` or a value type other than `Any` does not (`dict[str, object]`).
- *`Mapping[str, Any]`* (and `MutableMapping[str, Any]`): the same untyped dict, read-only; counted apart, and
  in the figure ("together"), as the audit of 27 November did (its 205 in app/chat at 1d994b2 is 193
  `dict[str, Any]` + 12 `Mapping[str, Any]`; the `Event` alias is used only in app/doors).
- *aliases*: a module-level name bound to exactly `dict[str, Any]` (`Event = dict[str, Any]`, `Event: TypeAlias
  = ...`, `type Event = ...`), or to another alias, found over the whole tree. An alias's *uses* are the
  names that load it, in the module that defines it and in every module that imports it with `from M import
  Event` (under its local name); the definition itself is counted once, as a `dict[str, Any]`.
- *`Any`*: every name `Any` (imported from typing) or attribute `typing.Any` loaded anywhere in the code, so
  `dict[str, Any]` counts one `Any` as well; an alias's use counts none.
- Annotations written as strings (`x: "dict[str, Any]"`) are parsed and counted as the rest.

The two figures of issue 46: "together" (`dict[str, Any]` + alias uses + `Mapping[str, Any]`) and `Any`, in
app/chat (all its sub-packages) and in app/.
"""

import argparse
import ast
import contextlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Counts:
    dict_any: int = 0  # `dict[str, Any]` written out
    alias_uses: int = 0  # names loading an alias of it
    any: int = 0  # `Any`
    mapping_any: int = 0  # `Mapping[str, Any]`, `MutableMapping[str, Any]`

    @property
    def dicts(self) -> int:
        """The issue's figure: `dict[str, Any]`, its aliases' uses and its read-only spelling, `Mapping[str, Any]`."""
        return self.dict_any + self.alias_uses + self.mapping_any

    def __add__(self, other: "Counts") -> "Counts":
        return Counts(self.dict_any + other.dict_any, self.alias_uses + other.alias_uses, self.any + other.any,
                      self.mapping_any + other.mapping_any)


def _annotations(tree: ast.AST) -> Iterator[ast.expr]:
    for node in ast.walk(tree):
        if isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None:
            yield node.annotation
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
            yield node.returns


def _with_string_annotations(tree: ast.Module) -> list[ast.AST]:
    """The tree, and the parsed text of every annotation written as a string."""
    parts: list[ast.AST] = [tree]
    for annotation in _annotations(tree):
        for node in ast.walk(annotation):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                with contextlib.suppress(SyntaxError):
                    parts.append(ast.parse(node.value, mode="eval"))
    return parts


def _is_any(node: ast.AST, any_names: set[str], typing_names: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in any_names
    return (isinstance(node, ast.Attribute) and node.attr == "Any" and isinstance(node.value, ast.Name)
            and node.value.id in typing_names)


_DICTS = ("dict", "Dict")
_MAPPINGS = ("Mapping", "MutableMapping")


def _str_any_of(node: ast.AST, any_names: set[str], typing_names: set[str]) -> str | None:
    """The container's name when `node` is `dict[str, Any]`, `Mapping[str, Any]` and the like, else None."""
    if not isinstance(node, ast.Subscript) or not isinstance(node.slice, ast.Tuple) or len(node.slice.elts) != 2:
        return None
    base = node.value
    name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else None
    if name not in _DICTS + _MAPPINGS or (name == "Dict" and isinstance(base, ast.Attribute)
                                          and not (isinstance(base.value, ast.Name) and base.value.id in typing_names)):
        return None
    key, value = node.slice.elts
    return name if isinstance(key, ast.Name) and key.id == "str" and _is_any(value, any_names, typing_names) else None


def _is_dict_any(node: ast.AST, any_names: set[str], typing_names: set[str]) -> bool:
    return _str_any_of(node, any_names, typing_names) in _DICTS


def _typing_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The local names of `typing.Any`, and of the `typing` module itself."""
    any_names: set[str] = set()
    typing_names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("typing", "typing_extensions"):
            any_names |= {alias.asname or alias.name for alias in node.names if alias.name == "Any"}
        elif isinstance(node, ast.Import):
            typing_names |= {alias.asname or alias.name for alias in node.names if alias.name == "typing"}
    return any_names, typing_names


def aliases_defined(source: str, known: set[tuple[str, str]] = frozenset(), module: str = "") -> set[str]:
    """The module-level names `source` binds to `dict[str, Any]`, or to an alias in `known` ((module, name))."""
    tree = ast.parse(source)
    any_names, typing_names = _typing_names(tree)
    local_aliases = _imported_aliases(tree, known) | {name for m, name in known if m == module}
    found: set[str] = set()
    for node in tree.body:
        target, value = _binding(node)
        if target is None or value is None:
            continue
        if _is_dict_any(value, any_names, typing_names) or (isinstance(value, ast.Name) and value.id in local_aliases):
            found.add(target)
    return found


def _binding(node: ast.stmt) -> tuple[str | None, ast.expr | None]:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id, node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        return node.target.id, node.value
    type_alias = getattr(ast, "TypeAlias", None)  # `type X = ...`, Python 3.12+
    if type_alias is not None and isinstance(node, type_alias):
        return node.name.id, node.value  # type: ignore[attr-defined]
    return None, None


def _imported_aliases(tree: ast.Module, known: Iterable[tuple[str, str]]) -> set[str]:
    known = set(known)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names |= {alias.asname or alias.name for alias in node.names if (node.module, alias.name) in known}
    return names


def count_source(source: str, aliases: Iterable[tuple[str, str]] = (), module: str = "") -> Counts:
    """The counts of one module's source; `aliases` are every alias of the tree as (module, name), `module`
    this one's dotted name (for the aliases it defines itself)."""
    tree = ast.parse(source)
    aliases = set(aliases)
    any_names, typing_names = _typing_names(tree)
    alias_names = _imported_aliases(tree, aliases) | {name for m, name in aliases if m == module}
    dict_any = alias_uses = any_count = mapping_any = 0
    for part in _with_string_annotations(tree):
        for node in ast.walk(part):
            container = _str_any_of(node, any_names, typing_names)
            if container in _DICTS:
                dict_any += 1
            elif container in _MAPPINGS:
                mapping_any += 1
            elif _is_any(node, any_names, typing_names) and isinstance(getattr(node, "ctx", ast.Load()), ast.Load):
                any_count += 1
            elif isinstance(node, ast.Name) and node.id in alias_names and isinstance(node.ctx, ast.Load):
                alias_uses += 1
    return Counts(dict_any, alias_uses, any_count, mapping_any)


def modules(app_root: Path) -> dict[str, str]:
    """Every module under app_root, dotted name to source."""
    found = {}
    for path in sorted(app_root.rglob("*.py")):
        parts = path.relative_to(app_root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path.read_text()
    return found


def find_aliases(sources: dict[str, str]) -> set[tuple[str, str]]:
    """Every alias of `dict[str, Any]` in the tree, aliases of aliases included."""
    known: set[tuple[str, str]] = set()
    while True:
        more = {(m, name) for m, source in sources.items() for name in aliases_defined(source, known, m)}
        if more <= known:
            return known
        known |= more


def count_tree(app_root: Path) -> tuple[dict[str, Counts], set[tuple[str, str]]]:
    sources = modules(app_root)
    aliases = find_aliases(sources)
    return {m: count_source(s, aliases, m) for m, s in sources.items()}, aliases


def package_total(counts: dict[str, Counts], package: str) -> Counts:
    total = Counts()
    for module, c in counts.items():
        if module == package or module.startswith(package + "."):
            total = total + c
    return total


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=HERE, help="a checkout whose app/ is counted")
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args(argv)
    app_root = args.source.resolve() / "app"
    counts, aliases = count_tree(app_root)
    print(f"app/ of {app_root.parent}")
    print(f"aliases of dict[str, Any]: {', '.join(f'{m}.{n}' for m, n in sorted(aliases)) or 'none'}")
    print(f"{'package':<16}{'dict[str, Any]':>16}{'alias uses':>12}{'Mapping[str, Any]':>19}{'together':>10}{'Any':>8}")
    packages = ["app", "app.chat", *sorted({".".join(m.split(".")[:2]) for m in counts if m.count(".") >= 2})]
    for package in dict.fromkeys(packages):
        c = package_total(counts, package)
        print(f"{package:<16}{c.dict_any:>16}{c.alias_uses:>12}{c.mapping_any:>19}{c.dicts:>10}{c.any:>8}")
    for title, key in (("dict[str, Any] together (with alias uses, Mapping[str, Any])", "dicts"), ("Any", "any")):
        print(f"top modules, {title}:")
        ranked = Counter({m: getattr(c, key) for m, c in counts.items() if getattr(c, key)})
        for module, n in ranked.most_common(args.top):
            print(f"  {n:4d}  {module}")


if __name__ == "__main__":
    main()
