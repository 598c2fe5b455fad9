"""The README and docs/ stay true: links land, flags are documented, examples run.

- every relative link in README.md and docs/*.md names a file that exists, and
  every ``#anchor`` a heading of that file (GitHub's slugs);
- every flag of every command's ``--help`` appears in the docs;
- the configuration reference (docs/configuration.md) decodes with every key;
- the command tables name exactly the commands there are;
- every ``benchd ...`` line of the README's shell blocks parses with that
  command's own parser, and the README stays short (~10 KB).
"""

from __future__ import annotations

import argparse
import re
import shlex
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchd.cli import COMMANDS, build_parser
from benchd.config.load import parse_config

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("**/*.md"))]

_FENCE = re.compile(r"^(```|~~~)")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_CODE_SPAN = re.compile(r"`+[^`]*`+")


def prose_lines(text: str) -> Iterator[str]:
    """The lines outside fenced code blocks."""
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            yield line


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())  # a link keeps its text
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file, with GitHub's -1, -2 for repeats."""
    seen: dict[str, int] = {}
    found = set()
    for line in prose_lines(path.read_text(encoding="utf-8")):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def relative_links(path: Path) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(prose_lines(path.read_text(encoding="utf-8")), 1):
        for target in _LINK.findall(_CODE_SPAN.sub("", line)):
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                yield number, target


def test_slugs_follow_githubs_rules() -> None:
    assert slug("Thresholds (CI gates)") == "thresholds-ci-gates"
    assert slug("The embedded default: `bash scripts/run.sh`") == (
        "the-embedded-default-bash-scriptsrunsh"
    )
    assert slug("`benchd once --format json`") == "benchd-once---format-json"
    assert slug("kind = \"http\"") == "kind--http"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    broken = []
    for number, target in relative_links(page):
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            broken.append(f"{page.name}:{number}: {target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{page.name}:{number}: {target}: no heading #{anchor}")
    assert broken == []


def _option_strings(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str]]:
    """(parser prog, flag) for every flag of a parser and of its subcommands' parsers."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                yield from _option_strings(sub)
        for flag in action.option_strings:
            if flag not in ("-h", "--help"):
                yield parser.prog, flag


def _all_flags() -> list[tuple[str, str]]:
    flags = list(_option_strings(build_parser()))
    for name in COMMANDS:
        parser = build_parser(name)
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        flags.extend(_option_strings(sub.choices[name]))
    return flags


def test_every_flag_of_every_help_is_documented() -> None:
    text = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
    missing = sorted(
        {
            f"{prog} {flag}"
            for prog, flag in _all_flags()
            if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text)
        }
    )
    assert missing == []


def test_the_flag_walk_sees_nested_commands() -> None:
    flags = set(_all_flags())
    assert ("benchd baseline save", "--repeats") in flags  # a subcommand's subcommand
    assert ("benchd", "--version") in flags


def test_config_reference_decodes_with_every_key(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("BRAIN_API_KEY", "docs-key")
    reference = DOCS / "configuration.md"
    data = tomllib.loads(reference.read_text().split("```toml")[1].split("```")[0])
    # the web config it names is read with the config: give it one, as docs/endpoints.md shows
    endpoints = (DOCS / "endpoints.md").read_text()
    (tmp_path / "web.toml").write_text(endpoints.split("```toml")[1].split("```")[0])
    data["server"]["web_config"] = str(tmp_path / "web.toml")
    config = parse_config(data, file=reference.name, base=ROOT)
    (probe,) = config.probes
    assert probe.name == "staging-memory"
    assert probe.load.late_tolerance_s == 0.010
    assert probe.drift.n_bootstrap == 2000
    assert config.web is not None and config.web.auth is not None


def _table_commands(text: str) -> set[str]:
    return set(re.findall(r"^\| `benchd (\w+)", text, flags=re.MULTILINE))


def test_the_command_tables_name_every_command() -> None:
    readme = README.read_text().split("## Commands")[1].split("\n## ")[0]
    assert _table_commands(readme) == set(COMMANDS)
    full = (DOCS / "commands.md").read_text().split("## Every command")[1].split("\n## ")[0]
    assert _table_commands(full) == set(COMMANDS)


def test_readme_starts_with_the_two_commands() -> None:
    lines = README.read_text().splitlines()
    block = lines[lines.index("```sh") + 1 : lines.index("```")]
    assert [line.split("#")[0].strip() for line in block] == [
        "bash scripts/run.sh",
        "bash scripts/test.sh",
    ]


def test_readme_is_short() -> None:
    assert len(README.read_bytes()) <= 10 * 1024


def _readme_benchd_lines() -> list[str]:
    """Each ``benchd ...`` command of the README's shell blocks, continuations joined."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(), flags=re.DOTALL)
    commands = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            for part in re.split(r"&&|;|\|(?!\|)", line.split(" #")[0]):
                words = part.strip().rstrip("&").strip()
                if words.startswith("benchd "):
                    commands.append(words)
    return commands


def test_every_benchd_command_in_the_readme_parses() -> None:
    commands = _readme_benchd_lines()
    assert len(commands) >= 7  # the quick start's, at least
    for command in commands:
        words = shlex.split(command)[1:]
        try:
            args = build_parser(words[0]).parse_args(words)
        except SystemExit as exc:  # argparse's error path
            raise AssertionError(f"README: {command!r} does not parse") from exc
        assert args.handler is not None, command
