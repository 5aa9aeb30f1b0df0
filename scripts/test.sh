#!/usr/bin/env bash
# Install agentlog with its test dependencies into .venv (and Debian's chromium
# and chromium-driver for the dashboard's browser test, node and npm for the real
# agent CLIs, gcc for the native hook client, when the machine lacks them) and run the whole test
# suite (slow tests included). This is the README's test command and
# what CI runs. When no shared fixtures are found it first fetches them
# (scripts/fetch_fixtures.py) and carries on without them if that fails.
#
#   ./scripts/test.sh            the whole suite (CI)
#   ./scripts/test.sh --quick    the quick tier only (tests marked `quick` by
#                                tests/conftest.py: the unit layers, under two
#                                minutes on 2 cores); no browser install
# Any other arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
QUICK=0
if [ "${1:-}" = "--quick" ]; then
    QUICK=1
    shift
fi
# apt_install WHY PACKAGE...: install Debian packages the suite needs (as root, or through
# sudo); where that is not possible, say what WHY says will happen without them.
apt_install() {
    local why="$1" as
    shift
    if [ "$(id -u)" = 0 ]; then as=""; elif command -v sudo >/dev/null 2>&1; then as="sudo"; else as="-"; fi
    if [ "$as" != "-" ] && command -v apt-get >/dev/null 2>&1; then
        $as apt-get update -qq >/dev/null
        $as env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
    else
        echo "scripts/test.sh: $* missing and cannot be installed here ($why)" >&2
    fi
}
# The dashboard's browser test drives Debian's Chromium through chromedriver.
if [ "$QUICK" = 0 ] && { ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; }; then
    apt_install "the browser test will fail; set AGENTLOG_SKIP_BROWSER=1 to skip it" chromium chromium-driver
fi
# The real agent CLIs (tests/test_real_agents.py) install from the npm registry.
if [ "$QUICK" = 0 ] && { ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; }; then
    apt_install "tests/test_real_agents.py will be skipped" nodejs npm
fi
# The native hook client (issue 29) is built with the system C compiler; its tests need one.
if ! command -v cc >/dev/null 2>&1; then
    apt_install "the native hook's tests will fail" gcc libc6-dev
fi
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test,team,otel,semantic]'
# The real-agent fixtures (shared/fixtures, found by agentlog.operations.fixtures.shared_dir):
# a clone without them fetches them from their public sources, each checked by SHA-256
# (tests/fixtures-manifest.json). Without a network the suite still runs; the tests that
# need them skip and say how to get them.
if ! .venv/bin/python -c 'import sys; from agentlog.operations.fixtures import shared_dir; sys.exit(shared_dir() is None)'; then
    echo "scripts/test.sh: no shared fixtures found; fetching them (scripts/fetch_fixtures.py)" >&2
    if ! .venv/bin/python scripts/fetch_fixtures.py --quiet; then
        echo "scripts/test.sh: the shared fixtures could not be fetched; the tests that need them will skip" \
             "(fetch them later with: python scripts/fetch_fixtures.py, or set AGENTLOG_SHARED)" >&2
    fi
fi
.venv/bin/python -m mypy
if [ "$QUICK" = 1 ]; then
    exec .venv/bin/python -m pytest -n 2 -p no:cacheprovider -m quick "$@"
fi
exec .venv/bin/python -m pytest -n 2 -p no:cacheprovider "$@"
