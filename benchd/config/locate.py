"""Which config a command runs: ``-c``, else ``$BENCHD_CONFIG``, else ``./benchd.toml``.

Every command that takes a config finds it in that order; where none is found,
``run`` and ``once`` run the embedded default and the others say what to give.
A config found rather than named is announced on stderr before anything else,
so that a ``benchd.toml`` (or an exported variable) never runs unnoticed.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from benchd.errors import UsageError

__all__ = ["CONFIG_ENV", "LOCAL_CONFIG", "ConfigSource", "locate_config"]

CONFIG_ENV = "BENCHD_CONFIG"
LOCAL_CONFIG = "benchd.toml"


@dataclass(frozen=True)
class ConfigSource:
    """The config a command runs (``path``; None: none found) and how it was found."""

    path: str | None
    why: str
    named: bool = False  # given with -c/--config on the command line

    def line(self, default: str = "the embedded default") -> str:
        """The one line that says which config runs, and why that one."""
        if self.path is None:
            return f"benchd: config: {default} ({self.why})"
        return f"benchd: config {self.path} ({self.why})"

    def announce(self, default: str = "the embedded default", *, as_json: bool = False) -> None:
        """Say on stderr which config runs, unless the command line named it.

        ``as_json``: as a log event shaped like the JSON log lines that follow it
        (``config`` null for ``default``), for a daemon whose stderr is collected.
        """
        if self.named:
            return
        text = self.line(default)
        if as_json:
            now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            event = {"config": self.path, "found": self.why, "event": "config", "level": "info"}
            text = json.dumps({**event, "timestamp": now})
        print(text, file=sys.stderr, flush=True)

    def required(self, command: str, alternative: str) -> str:
        """The path; a usage error naming every way to give one when none was found."""
        if self.path is not None:
            return self.path
        raise UsageError(
            f"{command} needs {alternative}, or a config: give --config FILE, set "
            f"${CONFIG_ENV} or run where ./{LOCAL_CONFIG} is"
        )


def locate_config(flag: str | None, environ: Mapping[str, str] | None = None) -> ConfigSource:
    """The config ``-c FLAG`` names, else ``$BENCHD_CONFIG``'s, else ``./benchd.toml``."""
    if flag:
        return ConfigSource(flag, "given with --config", named=True)
    env = (os.environ if environ is None else environ).get(CONFIG_ENV, "")
    if env:
        return ConfigSource(env, f"from ${CONFIG_ENV}")
    if Path(LOCAL_CONFIG).is_file():
        return ConfigSource(f"./{LOCAL_CONFIG}", "found in the working directory")
    return ConfigSource(None, f"no --config, no ${CONFIG_ENV}, no ./{LOCAL_CONFIG}")
