#!/usr/bin/env bash
# The whole test suite: installs frtrace with its test tools (and torch 2.13 CPU, for the tests
# that capture real gloo dumps) into .venv, a headless Chromium for the HTML page's tests (apt,
# when run as root), then runs lint, format check, types and tests. Each step says what it does
# and how long it took, so a fresh machine's first minutes are not silent.
# Usage: scripts/check.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
started=$SECONDS
step_started=$SECONDS

step() {
  step_started=$SECONDS
  echo "== $*"
}
took() {
  echo "   ($((SECONDS - step_started))s)"
}
# Lines of a long install worth showing, each with the seconds since the step began.
progress() {
  while IFS= read -r line; do
    case "$line" in
      Obtaining* | Collecting* | Downloading* | Processing* | Preparing* | Building* | \
        Installing* | Successfully* | \
        Setting\ up\ chromium* | Get:* | Fetched*)
        printf '   [%3ss] %s\n' "$((SECONDS - step_started))" "${line:0:110}"
        ;;
    esac
  done
}

# A headless browser for tests/test_html.py. As root (CI) it is installed and required; as
# another user the browser tests say what is missing and skip.
if [ "$(id -u)" = 0 ]; then
  export FRTRACE_REQUIRE_BROWSER=${FRTRACE_REQUIRE_BROWSER:-1}
  if ! { command -v chromium && command -v chromedriver; } >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
      step "installing chromium and chromium-driver (apt-get; the HTML page's browser tests)"
      export DEBIAN_FRONTEND=noninteractive
      apt-get update 2>&1 | progress
      apt-get install -y --no-install-recommends chromium chromium-driver 2>&1 | progress
      took
    else
      echo "note: no chromium and no apt-get: tests/test_html.py will fail (FRTRACE_REQUIRE_BROWSER)"
    fi
  fi
elif ! command -v chromium >/dev/null 2>&1; then
  echo "note: no chromium; the browser tests will skip (as root, this script installs it)"
fi

if [ ! -x .venv/bin/python ]; then
  step "creating .venv with $("$python" --version 2>&1)"
  "$python" -m venv .venv
  took
fi
step "installing frtrace[test,dask,s3] and torch 2.13 (CPU) into .venv (minutes on a fresh machine)"
.venv/bin/python -m pip install --disable-pip-version-check --progress-bar off \
  -e '.[test,dask,s3]' 'torch==2.13.0' \
  2> >(grep -v "is ignored: it is neither a file nor a directory" >&2) | progress
took
# The Dask engine's and the S3 tests must run here, not skip for a missing extra.
export FRTRACE_REQUIRE_EXTRAS=${FRTRACE_REQUIRE_EXTRAS:-1}
# One command per line: under `set -e` a failure inside an `a && b` list would not stop the run.
step "ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
took
step "mypy"
.venv/bin/mypy
took
step "import layers (lint-imports: each layer imports only those below it; docs/architecture.md)"
.venv/bin/lint-imports --no-cache
took
step "pytest"
.venv/bin/python -m pytest "$@"
took
echo "== all green in $((SECONDS - started))s"
