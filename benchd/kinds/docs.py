"""What the registry writes for people: each kind's key table and its ``benchd init`` starter.

Both are made from the kinds' settings classes (:data:`benchd.kinds.TARGET_KINDS`):
a key table from the fields' docs (``metadata=key(...)``), a starter from the
class's ``starter`` declaration, its keys' comments from those docs where the
starter gives none, and its ``[probe.budget]`` from the costs the starter's
settings declare. ``python -m benchd.kinds.docs --write`` rewrites the tables
between ``<!-- keys: KIND -->`` and ``<!-- /keys -->`` in docs/targets.md and
:data:`STARTERS_FILE`, which ``benchd init`` reads (it imports no kind: a
command's parser must stay light); tests/kinds/test_registry.py checks both
are current.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import tomli_w

from benchd.config.kinds import Starter, StarterKey
from benchd.config.schema import decode
from benchd.kinds import TARGET_KINDS, TargetKind

__all__ = [
    "DOCS_FILE",
    "STARTERS_FILE",
    "documented_kinds",
    "key_table",
    "rewrite_docs",
    "starter_document",
    "starter_settings",
    "starter_tables",
    "starters_text",
    "toml_value",
]

STARTERS_FILE = Path(__file__).resolve().parent.parent / "data" / "kind-starters.json"
"""The starters ``benchd init --kind`` writes, generated from the registry."""
DOCS_FILE = Path(__file__).resolve().parents[2] / "docs" / "targets.md"
"""Where the key tables are (in a checkout of benchd)."""

_BLOCK = re.compile(r"(<!-- keys: (\w+) -->\n)(.*?)(<!-- /keys -->)", re.S)


def _fields(settings: type[Any]) -> dict[str, dataclasses.Field[Any]]:
    return {f.name: f for f in dataclasses.fields(settings)}


def _shown(field: dataclasses.Field[Any]) -> str:
    """A field's default as a key table shows it."""
    value = field.default
    if value is dataclasses.MISSING:
        return "—"
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str):
        return f"`{value}`" if value else "—"
    return str(value)


def _rows(settings: type[Any]) -> Iterator[tuple[list[str], list[str], str]]:
    """(keys, defaults, doc) of each row: consecutive fields with one doc share a row."""
    row: tuple[list[str], list[str], str] | None = None
    for field in dataclasses.fields(settings):
        doc = field.metadata.get("doc")
        if doc is None:
            continue
        if row is None or row[2] != doc:
            if row is not None:
                yield row
            row = ([], [], doc)
        row[0].append(field.name)
        row[1].append(field.metadata.get("shown") or _shown(field))
    if row is not None:
        yield row


def key_table(settings: type[Any]) -> str:
    """The Markdown key table of a settings class's documented fields."""
    lines = ["| key | default | |", "|---|---|---|"]
    for keys, defaults, doc in _rows(settings):
        shown = defaults[:1] if len(set(defaults)) == 1 else defaults
        names = ", ".join(f"`{k}`" for k in keys)
        lines.append(f"| {names} | {', '.join(shown)} | {doc} |".replace("|  |", "| |"))
    return "\n".join(lines) + "\n"


def rewrite_docs(text: str) -> str:
    """``text`` with each ``<!-- keys: KIND -->`` block replaced by KIND's key table."""

    def table(match: re.Match[str]) -> str:
        settings = TARGET_KINDS[match.group(2)].settings_type
        return match.group(1) + key_table(settings) + match.group(4)

    return _BLOCK.sub(table, text)


def documented_kinds() -> list[str]:
    """The kinds whose settings document at least one key (each has a table in the docs)."""
    return [name for name, kind in TARGET_KINDS.items() if any(_rows(kind.settings_type))]


def toml_value(value: Any) -> str:
    """``value`` as TOML, a table inline (a starter keeps each key on one line)."""
    if isinstance(value, Mapping):
        inner = ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return tomli_w.dumps({"v": value}).rstrip("\n")[len("v = ") :]


def _keys(
    header: str, keys: Sequence[StarterKey], docs: Mapping[str, dataclasses.Field[Any]]
) -> list[str]:
    lines = [header]
    for name, value, comment in keys:
        doc = comment or (docs[name].metadata.get("doc", "") if name in docs else "")
        if not doc:
            raise ValueError(f"starter key {header} {name}: no comment and no field doc")
        lines += [f"# {doc}", f"{name} = {toml_value(value)}"]
    return lines


def starter_tables(entry: TargetKind[Any]) -> str:
    """A kind's ``[probe.target]`` tables, annotated, as its starter declares them."""
    starter: Starter | None = entry.starter
    if starter is None:
        raise ValueError(f"kind {entry.name!r} declares no starter")
    docs = _fields(entry.settings_type)
    target = (("kind", entry.name, f"store kind: {starter.about}"), *starter.keys)
    lines = _keys("[probe.target]", target, docs)
    for name, keys in starter.tables:
        lines += ["", *_keys(f"[probe.target.{name}]", keys, {})]
    return "\n".join(lines) + "\n"


def starter_settings(entry: TargetKind[Any]) -> Any:
    """The settings a kind's starter decodes to (a starter that does not is a bug)."""
    if entry.starter is None:
        raise ValueError(f"kind {entry.name!r} declares no starter")
    table: dict[str, Any] = {k: v for k, v, _ in entry.starter.keys}
    for name, keys in entry.starter.tables:
        place = table
        for part in name.split("."):
            place = place.setdefault(part, {})
        place.update({k: v for k, v, _ in keys})
    return decode(entry.settings_type, table, file=f"the {entry.name} starter", path="probe.target")


def starter_document() -> dict[str, Any]:
    """What :data:`STARTERS_FILE` holds: the default kind, and each kind's starter."""
    kinds: dict[str, Any] = {}
    for name, entry in TARGET_KINDS.items():
        if entry.starter is None:
            continue
        costs = entry.costs(starter_settings(entry))
        limits = [costs.reads_per_min, costs.writes_per_min]
        kinds[name] = {
            "target": starter_tables(entry),
            "budget": limits if costs.reads_per_min is not None else None,
            "edit": entry.starter.edit,
        }
    return {"default": next(iter(kinds)), "kinds": kinds}


def starters_text() -> str:
    return json.dumps(starter_document(), indent=1, ensure_ascii=False) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchd.kinds.docs",
        description="Rewrite docs/targets.md's key tables and the starters benchd init "
        "writes, from the kinds' settings classes; without --write, say which are stale.",
    )
    parser.add_argument("--write", action="store_true", help="rewrite the stale files")
    args = parser.parse_args(argv)
    wanted = {STARTERS_FILE: starters_text()}
    if DOCS_FILE.exists():
        wanted[DOCS_FILE] = rewrite_docs(DOCS_FILE.read_text(encoding="utf-8"))
    for path, text in wanted.items():
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current == text:
            print(f"{path}: current")
        elif args.write:
            path.write_text(text, encoding="utf-8")
            print(f"{path}: rewritten")
        else:
            print(f"{path}: stale (pass --write)")


if __name__ == "__main__":
    main()
