#!/usr/bin/env bash
# Set up ./.venv and run benchd. With no arguments: `benchd run` on the
# embedded default (reference store in-process, packaged fixture, /metrics on
# 127.0.0.1:9108). Any arguments are passed to benchd instead.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh" ""
if [ "$#" -eq 0 ]; then set -- run; fi
exec "$VENV/bin/benchd" "$@"
