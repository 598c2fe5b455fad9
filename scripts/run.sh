#!/usr/bin/env bash
# Set up ./.venv and run benchd. With no arguments: `benchd run` on the config
# it finds ($BENCHD_CONFIG, ./benchd.toml), else on the embedded default (reference
# store in-process, packaged fixture, /metrics on 127.0.0.1:9108). Flags go to `benchd run`
# (`bash scripts/run.sh --listen 127.0.0.1:9118 --config benchd.toml`);
# a command name runs that command (`bash scripts/run.sh once --format json`).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh" ""
if [ "$#" -eq 0 ] || [[ "$1" == -* && "$1" != "--help" && "$1" != "-h" && "$1" != "--version" ]]; then
    set -- run "$@"
fi
exec "$VENV/bin/benchd" "$@"
