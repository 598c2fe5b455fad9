"""The store seam's declarations: capabilities per kind, read and never probed."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from benchd.config.kinds import target_kinds
from benchd.config.load import parse_config
from benchd.kinds import TARGET_KINDS, capabilities_of
from benchd.store.protocol import Capabilities

PACKAGE = Path(__file__).resolve().parents[2] / "benchd"
GENERIC = ("config/load.py", "budget.py", "probe.py", "cycle.py", "drift/tracker.py",
           "drift/baseline.py", "commands/purge.py")  # fmt: skip


def test_every_registered_kind_is_the_one_config_decodes_with() -> None:
    assert set(target_kinds()) == set(TARGET_KINDS)
    for name, kind in TARGET_KINDS.items():
        assert target_kinds()[name] is kind


def test_a_store_that_can_do_everything_lacks_nothing_but_one_that_cannot_says_what() -> None:
    full = Capabilities(lists=True, writes=True, deletes=True, lease=True)
    assert full.lacks() == ()
    bare = Capabilities(writes=True)
    lacks = " | ".join(bare.lacks())
    assert "not verified" in lacks and "no purge" in lacks and "second writer" in lacks


def _caps(kind: str, **target: object) -> Capabilities:
    fixture = "packaged:smoke"
    config = parse_config(
        {"probe": [{"name": "p", "fixture": fixture, "target": {"kind": kind, **target}}]},
        file="x.toml",
        base=Path("."),
        secrets=False,
    )
    probe = config.probes[0]
    return capabilities_of(probe.target.kind, probe.target.settings)


def test_an_http_target_can_do_what_its_templates_allow() -> None:
    search = {"path": "/s", "ids": "ids"}
    assert _caps("http", url="http://h", search=search) == Capabilities(
        load_sender=True, retries=True
    )
    with_all = _caps(
        "http",
        url="http://h",
        search={**search, "scores": "scores"},
        seed={"path": "/i"},
        export={"path": "/e", "ids": "ids"},
        delete={"path": "/d/{id}", "method": "DELETE"},
    )
    assert with_all.lists and with_all.writes and with_all.deletes and with_all.scores
    assert with_all.lease  # a lease record, through the seed, export and delete templates
    assigned = _caps(
        "http",
        url="http://h",
        search=search,
        seed={"path": "/i"},
        export={"path": "/e", "ids": "ids", "fixture_ids": "fids"},
        delete={"path": "/d/{id}", "method": "DELETE"},
    )  # the store assigns its own ids: a lease record could not be told by its id
    assert not assigned.lease and "second writer" in " | ".join(assigned.lacks())
    no_delete = _caps(
        "http",
        url="http://h",
        search=search,
        seed={"path": "/i"},
        export={"path": "/e", "ids": "ids"},
    )
    assert not no_delete.lease


def test_zengram_keeps_every_promise() -> None:
    assert _caps("zengram", url="http://h").lacks() == ()


@pytest.mark.parametrize("module", GENERIC)
def test_generic_code_never_probes_a_target_or_its_settings_for_attributes(module: str) -> None:
    tree = ast.parse((PACKAGE / module).read_text())
    probed = [
        ast.unparse(node)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("getattr", "hasattr")
        and any(word in ast.unparse(node.args[0]) for word in ("target", "settings", "ranked"))
    ]
    assert probed == []


def test_validate_says_which_guarantees_a_probe_lacks(tmp_path: Path) -> None:
    from benchd.commands.validate import guarantee_warnings

    config = tmp_path / "c.toml"
    config.write_text(
        '[[probe]]\nname = "full"\nfixture = "packaged:smoke"\n'
        '[probe.target]\nkind = "zengram"\nurl = "http://127.0.0.1:9"\n'
        '[[probe]]\nname = "bare"\nfixture = "packaged:smoke"\n'
        '[probe.target]\nkind = "http"\nurl = "http://127.0.0.1:8"\n'
        '[probe.target.search]\npath = "/s"\nids = "ids"\n'
    )
    (line,) = guarantee_warnings(config)
    assert line.startswith("warning: probe 'bare' (kind http) lacks: ")
    assert "not verified" in line and "no purge" in line and "second writer" in line
