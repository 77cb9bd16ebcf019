#!/usr/bin/env bash
# The whole test suite: installs frtrace with its test tools (and torch 2.13 CPU, for the tests
# that capture real gloo dumps) into .venv, then runs lint, format check, types and tests.
# Usage: scripts/check.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]' 'torch==2.13.0' \
  2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
echo "== ruff" && .venv/bin/ruff check . && .venv/bin/ruff format --check .
echo "== mypy" && .venv/bin/mypy
echo "== pytest" && .venv/bin/python -m pytest "$@"
