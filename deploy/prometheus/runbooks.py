#!/usr/bin/env python3
"""Every alert's runbook_url, built from one base URL: where your copy of these docs lives.

Each alert in alerts.yml links to its runbook, a heading of this repository's
docs/deploy.md ("Runbooks"): ``BASE/docs/deploy.md#<alert name in lower case>``
(or its family's heading: the fast and slow burn alerts share one).
BASE is the one setting, the same in every rule, and the shipped value
points at the project's repository. Point it at the copy your on-call can
open (an internal Git server, a docs site) and every file that carries the
URL follows — alerts.yml, the promtool tests in tests/ and the generated
Kubernetes PrometheusRule:

    python3 deploy/prometheus/runbooks.py                       # print BASE, check every link
    python3 deploy/prometheus/runbooks.py --base https://git.example.com/sre/benchd/-/blob/main
    python3 deploy/prometheus/runbooks.py --base "file://$PWD"  # this checkout (one machine)

The check (also a test) fails when the rules disagree on BASE, when a link
names another heading than its alert's, or when that heading is missing from
the docs. Python's standard library only.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = ["DOC", "RULES", "check", "rewrite", "slug"]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RULES = HERE / "alerts.yml"
DOC = "docs/deploy.md"
# Files that carry a runbook_url besides alerts.yml: the promtool tests' expectations.
TESTS = sorted((HERE / "tests").glob("*.yml"))
K8S_RULE = ROOT / "deploy" / "k8s" / "base" / "prometheusrule.yaml"
_URL = re.compile(
    r"(?P<key>runbook_url:\s*)(?P<base>\S+?)/(?P<doc>docs/[\w./-]+\.md)#(?P<anchor>[\w-]+)"
)
_ALERT = re.compile(r"^\s*- alert:\s*(\w+)\s*$", re.MULTILINE)


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def rewrite(text: str, base: str) -> str:
    """``text`` with the base of every runbook_url replaced by ``base``."""
    return _URL.sub(lambda m: f"{m['key']}{base.rstrip('/')}/{m['doc']}#{m['anchor']}", text)


def _headings(doc: Path) -> set[str]:
    fenced, found = False, set()
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"^#{1,6}\s+(.*?)\s*$", line)):
            found.add(slug(m.group(1)))
    return found


def _rule_links(text: str) -> list[tuple[str, re.Match[str] | None]]:
    """(alert name, its runbook_url match) for every alert of a rules file, in order."""
    starts = [(m.group(1), m.start()) for m in _ALERT.finditer(text)]
    ends = [s for _, s in starts[1:]] + [len(text)]
    return [(name, _URL.search(text, s, e)) for (name, s), e in zip(starts, ends, strict=True)]


def check(files: Iterable[Path] = (RULES, *TESTS)) -> tuple[set[str], list[str]]:
    """The bases in use and every problem: one base, each alert's own heading, heading exists."""
    bases: set[str] = set()
    problems: list[str] = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        for match in _URL.finditer(text):
            bases.add(match["base"])
            doc = ROOT / match["doc"]
            if not doc.is_file() or match["anchor"] not in _headings(doc):
                problems.append(f"{path.name}: {match.group(0)}: no such heading in {match['doc']}")
    for alert, match in _rule_links(RULES.read_text(encoding="utf-8")):
        if match is None:
            problems.append(f"{RULES.name}: {alert}: no runbook_url")
        # its own heading, or its family's (BenchdLatencyBudgetBurnFast: #benchdlatencybudgetburn)
        elif not slug(alert).startswith(match["anchor"]) or match["doc"] != DOC:
            problems.append(f"{RULES.name}: {alert}: runbook_url names {match['doc']}#"
                            f"{match['anchor']}, not {DOC}#{slug(alert)}")  # fmt: skip
    if len(bases) > 1:
        problems.append(f"more than one base URL: {', '.join(sorted(bases))}")
    return bases, problems


def set_base(base: str) -> list[Path]:
    """Rewrite every runbook_url under ``base``: the rules, their promtool tests and the
    Kubernetes PrometheusRule generated from them (its runbook_url lines are the rules'
    own, so the same text rewrite keeps it what deploy/k8s/sync_rules.py would write)."""
    changed = []
    for path in (RULES, *TESTS, K8S_RULE):
        text = path.read_text(encoding="utf-8")
        if (new := rewrite(text, base)) != text:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--base",
        help="the URL under which docs/deploy.md is served: your Git server's or docs "
        'site\'s (https://...), or this checkout on the machine that reads the pages ("file://$PWD")',
    )
    args = parser.parse_args(argv)
    if args.base:
        if not re.match(r"^(https?|file)://\S+$", args.base):
            parser.error(f"--base: an http(s) or file:// URL, got {args.base!r}")
        for path in set_base(args.base):
            print(f"rewrote {path.relative_to(ROOT)}", file=sys.stderr)
    bases, problems = check()
    print("\n".join(problems) or f"runbook base: {' '.join(sorted(bases))} (every link checked)")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
