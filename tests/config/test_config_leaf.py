"""config is a leaf: importing it loads no adapter, no load engine, no drift machinery.

Target kinds register their settings schemas with :mod:`benchd.config.kinds`
when an entry point hands them over (``benchd.kinds.register_kinds``);
config never imports the targets package itself. The check runs in a fresh
interpreter, since this test process has imported everything already.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

PROBE = textwrap.dedent(
    """
    import json, sys
    import benchd.config.load
    leaf = sorted(m for m in sys.modules if m.split(".")[0] in {"numpy", "httpx", "anyio"}
                  or m.startswith(("benchd.kinds", "benchd.store", "benchd.http",
                                   "benchd.drift.tracker", "benchd.cycle"))
                  or m == "benchd.load")
    print(json.dumps(leaf))
    """
)


def test_importing_config_loads_no_adapter_engine_or_numpy() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(out.stdout) == []


def test_load_config_decodes_with_the_kinds_an_entry_point_handed_it(tmp_path: Path) -> None:
    config = tmp_path / "benchd.toml"
    config.write_text(
        '[[probe]]\nname = "p"\nfixture = "packaged:smoke"\n'
        '[probe.target]\nkind = "zengram"\nurl = "http://127.0.0.1:8084"\n'
        'namespace = "leaf"\n'
    )
    script = textwrap.dedent(
        f"""
        from benchd.config.load import load_config
        from benchd.kinds import register_kinds
        register_kinds()
        target = load_config({str(config)!r}).probes[0].target
        print(target.kind, type(target.settings).__name__, target.url, target.namespace)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.split() == ["zengram", "ZengramConfig", "http://127.0.0.1:8084", "leaf"]
