"""Runbook links: one base URL for every alert, each pointing at a heading that exists.

deploy/prometheus/runbooks.py builds every alert's runbook_url from one base;
its check is the test, and its rewrite is shown to touch nothing but the base.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from deploy_support import PROMETHEUS_DIR, alert_rules

REPO = PROMETHEUS_DIR.parents[1]


def _runbooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("runbooks", PROMETHEUS_DIR / "runbooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_runbook_url_shares_one_base_and_lands_on_its_alerts_heading() -> None:
    bases, problems = _runbooks().check()
    assert problems == []
    assert len(bases) == 1 and re.match(r"^https://\S+$", next(iter(bases)))


def test_every_alert_has_a_runbook_in_the_docs() -> None:
    runbooks = _runbooks()
    deploy_doc = (PROMETHEUS_DIR.parents[1] / runbooks.DOC).read_text(encoding="utf-8")
    headings = {runbooks.slug(h) for h in re.findall(r"^#+\s+(.*)$", deploy_doc, re.MULTILINE)}
    for rule in alert_rules():
        anchor = rule["annotations"]["runbook_url"].rsplit("#", 1)[1]
        assert anchor in headings, rule["alert"]
        assert runbooks.slug(rule["alert"]).startswith(anchor), rule["alert"]


def test_the_check_catches_a_missing_heading_and_a_second_base(tmp_path: Path) -> None:
    runbooks = _runbooks()
    text = runbooks.RULES.read_text(encoding="utf-8")
    broken = tmp_path / "alerts.yml"
    broken.write_text(text.replace("#benchdmodelchanged", "#no-such-heading", 1), "utf-8")
    other = tmp_path / "other.yml"
    other.write_text(runbooks.rewrite(text, "https://docs.example.org/benchd"), "utf-8")
    _, problems = runbooks.check([broken, other])
    assert any("#no-such-heading: no such heading" in p for p in problems)
    assert any(p.startswith("more than one base URL") for p in problems)


def test_setting_the_base_rewrites_only_runbook_urls_and_round_trips() -> None:
    runbooks = _runbooks()
    text = runbooks.RULES.read_text(encoding="utf-8")
    (base,) = runbooks.check()[0]
    moved = runbooks.rewrite(text, "https://git.example.com/sre/benchd/-/blob/main/")
    changed = [
        (a, b) for a, b in zip(text.splitlines(), moved.splitlines(), strict=True) if a != b
    ]
    assert len(changed) == len(alert_rules())
    for old, new in changed:
        assert old.strip().startswith("runbook_url: " + base)
        assert new.strip().startswith("runbook_url: https://git.example.com/sre/benchd/-/blob/main/docs/")
        assert old.rsplit("/docs/", 1)[1] == new.rsplit("/docs/", 1)[1]
    assert runbooks.rewrite(moved, base) == text


def test_the_base_may_be_this_checkout_and_every_rule_then_links_into_it(tmp_path: Path) -> None:
    """One flag sets the address every page carries; file:// points it at the local docs."""
    import shutil

    copy = tmp_path / "repo"
    for part in ("deploy", "docs"):
        shutil.copytree(REPO / part, copy / part)
    script = copy / "deploy" / "prometheus" / "runbooks.py"
    base = f"file://{copy}"
    done = subprocess.run(
        [sys.executable, str(script), "--base", base], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert f"runbook base: {base} (every link checked)" in done.stdout
    rules = (copy / "deploy" / "prometheus" / "alerts.yml").read_text(encoding="utf-8")
    assert f"runbook_url: {base}/docs/deploy.md#benchdqualitydrift" in rules
    assert "github.com/benchd" not in rules
    k8s = (copy / "deploy" / "k8s" / "base" / "prometheusrule.yaml").read_text(encoding="utf-8")
    assert f"{base}/docs/deploy.md#benchdqualitydrift" in k8s
    bad = subprocess.run(
        [sys.executable, str(script), "--base", "ftp://x"], capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and "an http(s) or file:// URL" in bad.stderr


def test_setting_the_base_needs_nothing_beyond_the_standard_library(tmp_path: Path) -> None:
    """The README runs it from benchd's own venv, which has no PyYAML: it must not need it,
    and the Kubernetes rule it rewrites stays what sync_rules.py generates."""
    import shutil

    copy = tmp_path / "repo"
    for part in ("deploy", "docs"):
        shutil.copytree(REPO / part, copy / part)
    script = copy / "deploy" / "prometheus" / "runbooks.py"
    base = f"file://{copy}"
    no_yaml = (
        "import runpy, sys; sys.modules['yaml'] = None; sys.argv = sys.argv[1:]; "
        "runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-c", no_yaml, str(script), "--base", base],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    k8s = copy / "deploy" / "k8s" / "base" / "prometheusrule.yaml"
    rewritten = k8s.read_text(encoding="utf-8")
    assert f"{base}/docs/deploy.md#benchdqualitydrift" in rewritten
    sync = subprocess.run(
        [sys.executable, str(copy / "deploy" / "k8s" / "sync_rules.py")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert sync.returncode == 0, sync.stderr
    assert k8s.read_text(encoding="utf-8") == rewritten  # regenerating changes nothing
