#!/usr/bin/env bash
# Install agentlog with its test dependencies into .venv and run the whole
# test suite (slow tests included). This is the README's test command and
# what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
.venv/bin/python -m mypy
exec .venv/bin/python -m pytest -n 2 -p no:cacheprovider "$@"
