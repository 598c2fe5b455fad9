#!/usr/bin/env bash
# Set up ./.venv with the dev extras and the real embedding models (the
# `models` extra: the model tests run in CI), install what the tests need from
# apt (promtool + prometheus from Debian's `prometheus` package, Debian's
# `prometheus-alertmanager` for the alert-routing test and Debian's `chromium`
# for the status page test), then run the linters and the test suite. Extra
# arguments go to pytest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh" "[dev,models,pgvector,milvus]"
cd "$ROOT"
# Install Debian packages without starting their services: a package such as
# prometheus or prometheus-alertmanager would start a system daemon (:9090,
# :9093); the tests run their own. policy-rc.d exit 101 ("action forbidden",
# honoured by invoke-rc.d and deb-systemd-invoke) keeps them from starting,
# instead of stopping afterwards whatever daemon happens to run on this machine.
apt_install() {
    local policy=/usr/sbin/policy-rc.d saved=""
    if [ -e "$policy" ]; then saved="$(mktemp)"; cp -p "$policy" "$saved"; fi
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    local rc=0
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "$@" >/dev/null || rc=$?
    if [ -n "$saved" ]; then mv -f "$saved" "$policy"; else rm -f "$policy"; fi
    return "$rc"
}
need() {  # need COMMAND PACKAGE WHY
    command -v "$1" >/dev/null 2>&1 && return 0
    if [ "$(id -u)" = 0 ]; then
        echo "scripts/test.sh: installing Debian's $2 ($3)" >&2
        apt_install "$2"
    else
        echo "scripts/test.sh: $1 not found; run 'sudo apt-get install $2' ($3)" >&2
    fi
}
need promtool prometheus "promtool and prometheus for the rule and scrape tests"
need prometheus-alertmanager prometheus-alertmanager "the alert-routing test"
need chromium chromium "the status page test"
# --- mcp kind: the npm MCP servers its tests run (server-memory, the supergateway
# stdio->HTTP bridge), pinned by tests/kinds/mcp/npm/package-lock.json, installed into
# ./.ci-npm/ (git-ignored, never global); reinstalled only when the lockfile changes.
if command -v npm >/dev/null 2>&1; then
    NPM_PINS="$ROOT/tests/kinds/mcp/npm"
    if ! cmp -s "$NPM_PINS/package-lock.json" "$ROOT/.ci-npm/package-lock.json" \
        || [ ! -x "$ROOT/.ci-npm/node_modules/.bin/mcp-server-memory" ]; then
        rm -rf "$ROOT/.ci-npm" && mkdir -p "$ROOT/.ci-npm"
        cp "$NPM_PINS/package.json" "$NPM_PINS/package-lock.json" "$ROOT/.ci-npm/"
        (cd "$ROOT/.ci-npm" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
    fi
else
    echo "scripts/test.sh: npm not found; the mcp kind's server tests will skip (fail in CI)" >&2
fi
# -- qdrant kind (experimental): qdrant-client (the extra benchd[qdrant]); tests/stores
# runs it in its local mode (no Qdrant server). The lancedb kind: LanceDB (benchd[lancedb]),
# embedded in benchd's process. Installed beside the extras above.
inproc_stamp="$VENV/.benchd-installed[qdrant,lancedb]"
if [ ! -f "$inproc_stamp" ] || [ "$ROOT/pyproject.toml" -nt "$inproc_stamp" ]; then
    "$VENV/bin/python" -m pip install -q -e "$ROOT[qdrant,lancedb]"
    touch "$inproc_stamp"
fi
# -- vector stores: PostgreSQL + pgvector, Chroma and Milvus Lite from PyPI, in their
# own virtualenv (chromadb alone brings ~90 packages); tests/stores starts them on loopback.
# BENCHD_REQUIRE_STORES=1 turns a missing store into a failure instead of a skip.
BENCHD_STORES_VENV="${BENCHD_STORES_VENV:-$ROOT/.venv-stores}"
stores_stamp="$BENCHD_STORES_VENV/.benchd-stores-installed"
if [ ! -f "$stores_stamp" ] || [ "$ROOT/scripts/stores-requirements.txt" -nt "$stores_stamp" ]; then
    "$PY" -m venv "$BENCHD_STORES_VENV"
    "$BENCHD_STORES_VENV/bin/python" -m pip install -q --upgrade pip
    "$BENCHD_STORES_VENV/bin/python" -m pip install -q -r "$ROOT/scripts/stores-requirements.txt"
    touch "$stores_stamp"
fi
# PostgreSQL refuses to run as root: the tests run it as this unprivileged user.
if [ "$(id -u)" = 0 ] && ! id -u pgserver >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin pgserver
fi
# BENCHD_TEST_ROOT=DIR: lint and test DIR, a copy of this checkout's files, with the
# environments installed above (.ci/run puts one in a folder other users cannot enter, with
# nothing beside it). DIR imports its own benchd and reaches the stores' venv and the npm
# servers through links in it, where a clone holding them would have them.
if [ -n "${BENCHD_TEST_ROOT:-}" ]; then
    TEST_ROOT="$(cd "$BENCHD_TEST_ROOT" && pwd)"
    STORES_VENV="$(cd "$BENCHD_STORES_VENV" && pwd)"
    [ -e "$TEST_ROOT/.venv-stores" ] || ln -s "$STORES_VENV" "$TEST_ROOT/.venv-stores"
    [ -e "$TEST_ROOT/.ci-npm" ] || [ ! -d "$ROOT/.ci-npm" ] || ln -s "$ROOT/.ci-npm" "$TEST_ROOT/.ci-npm"
    BENCHD_STORES_VENV="$TEST_ROOT/.venv-stores"
    export PYTHONPATH="$TEST_ROOT${PYTHONPATH:+:$PYTHONPATH}"
    cd "$TEST_ROOT"
    echo "scripts/test.sh: testing $TEST_ROOT with the environments of $ROOT" >&2
fi
export BENCHD_STORES_VENV BENCHD_REQUIRE_STORES=1
"$VENV/bin/ruff" check benchd tests bench
"$VENV/bin/mypy"
# The suite runs as parallel pytest processes ("parts", PARTS below): one per store matrix
# of tests/stores, each starting only its own store's servers, and two for everything else
# but tests/bench, which runs on its own after them.
# Explicit test paths among the arguments run as one process, as pytest alone would.
run_parts=1
skip_value=""
for arg in "$@"; do
    if [ -n "$skip_value" ]; then skip_value=""; continue; fi
    case "$arg" in
        -k|-m|-p|-o|-c|-W|--deselect|--ignore|--ignore-glob|--basetemp|--junitxml|--junit-xml\
        |--durations|--timeout|--rootdir|--confcutdir|--maxfail|--tb|--log-file|--import-mode)
            skip_value=1 ;;
        -*) ;;
        *) if [ -e "${arg%%::*}" ]; then run_parts=""; fi ;;
    esac
done
# pytest exits 5 when it collects nothing: that is a failure here, not a pass.
if [ -z "$run_parts" ]; then
    set +e
    "$VENV/bin/python" -m pytest "$@"
    rc=$?
    set -e
    if [ "$rc" -eq 5 ]; then echo "scripts/test.sh: no tests were collected" >&2; exit 1; fi
    exit "$rc"
fi
# Each part: NAME|its BENCHD_TEST_STORES (tests/stores/conftest.py)|its pytest arguments.
# The parts run side by side, except the last: tests/bench, whose soaks count a probe's
# cycles against the clock, runs alone once they are done. The "rest" part keeps every test
# the others do not take (a store without a part of its own, a new folder), so the parts
# always hold the whole suite. Each part has its own TMPDIR (pytest's tmp_path, the
# servers' data dirs and tests/conftest.py's BENCHD_STATE_DIR, never an exported one),
# traversable but not listable by PostgreSQL's unprivileged user.
STORE_PARTS=(pgvector chroma milvus qdrant lancedb)
FIRST_DIRS=(tests/commands tests/config tests/deploy tests/drift tests/embed tests/fixtures)
ALONE_DIR=tests/bench
PARTS=()
for store in "${STORE_PARTS[@]}"; do PARTS+=("$store|only:$store|tests/stores"); done
PARTS+=("first||${FIRST_DIRS[*]}")
rest_args="${FIRST_DIRS[*]/#/--ignore=} --ignore=$ALONE_DIR"
PARTS+=("rest|except:$(IFS=,; echo "${STORE_PARTS[*]}")|$rest_args")
PARTS+=("bench||$ALONE_DIR")
# With a selection (-k, -m, --deselect) a part may hold none of it; without one, an empty
# part means its tests went missing.
selecting=""
for arg in "$@"; do
    case "$arg" in -k*|-m*|--deselect*) selecting=1 ;; esac
done
PARTS_DIR="$(mktemp -d "${TMPDIR:-/tmp}/benchd-parts.XXXXXX")"
chmod 711 "$PARTS_DIR"
pids=() shown=0 rc=0 collected="" summary=()
show_part() {  # show_part INDEX EXIT: its output, and its line of the summary
    local name="${PARTS[$1]%%|*}" last
    echo "=============== part $name: exit $2, done at ${SECONDS}s ==============="
    cat "$PARTS_DIR/$name.log"
    last="$(grep -E '^(=+ )?[0-9].* in [0-9.]+s' "$PARTS_DIR/$name.log" | tail -n 1 || true)"
    summary+=("$name (exit $2): ${last:-no summary}")
    shown=$(($1 + 1))
}
stop_parts() {  # SIGINT: pytest stops its servers and prints what it has
    local i
    for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
    wait
    if [ "$shown" -lt "${#pids[@]}" ]; then
        for ((i = shown; i < ${#pids[@]}; i++)); do show_part "$i" stopped; done
        printf '%s\n' "${summary[@]}"
    fi
    rm -rf "$PARTS_DIR"
}
trap stop_parts EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# Job control: each part in its own process group, where SIGINT is not ignored (as it is
# for background commands of a script), so stop_parts reaches pytest.
launch_part() {  # launch_part INDEX PYTEST-ARGUMENTS...
    local name stores args
    IFS='|' read -r name stores args <<<"${PARTS[$1]}"
    shift
    mkdir -m 711 "$PARTS_DIR/$name"
    set -m
    # shellcheck disable=SC2086  # args: words without spaces
    env -u BENCHD_STATE_DIR TMPDIR="$PARTS_DIR/$name" BENCHD_TEST_STORES="$stores" \
        "$VENV/bin/python" -m pytest $args "$@" >"$PARTS_DIR/$name.log" 2>&1 &
    pids+=("$!")
    set +m
}
finish_part() {  # finish_part INDEX: wait for it, show it, count its exit
    local part_rc=0
    wait "${pids[$1]}" || part_rc=$?
    show_part "$1" "$part_rc"
    if [ "$part_rc" -ne 5 ]; then collected=1; fi
    if [ "$part_rc" -eq 5 ] && [ -z "$selecting" ]; then
        echo "scripts/test.sh: part ${PARTS[$1]%%|*} collected no tests" >&2
        rc=1
    elif [ "$part_rc" -ne 0 ] && [ "$part_rc" -ne 5 ]; then
        rc=1
    fi
}
alone=$((${#PARTS[@]} - 1))
names=("${PARTS[@]%%|*}")
echo "scripts/test.sh: parts ${names[*]:0:alone} in parallel, then ${names[alone]}" >&2
SECONDS=0
for ((i = 0; i < alone; i++)); do launch_part "$i" "$@"; done
for ((i = 0; i < alone; i++)); do finish_part "$i"; done
launch_part "$alone" "$@"
finish_part "$alone"
echo "=============== scripts/test.sh: ${#PARTS[@]} parts, ${SECONDS}s ==============="
printf '%s\n' "${summary[@]}"
if [ -z "$collected" ]; then echo "scripts/test.sh: no tests were collected" >&2; rc=1; fi
exit "$rc"
