#!/usr/bin/env bash
# First contact: install frtrace (no torch needed) into .venv and analyze the bundled
# tutorial fixture, where rank 0 issued one all_reduce that rank 1 never issued.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e . \
  2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
# An editable install leaves frtrace's modules to be compiled at first import; where
# PYTHONDONTWRITEBYTECODE is set (many containers), that would be 0.1 s of every run.
.venv/bin/python -m compileall -q frtrace >/dev/null
set +e
.venv/bin/frtrace fixtures/tutorial "$@"
status=$?
echo "(frtrace exited with status $status: 0 healthy, 1 findings, 2 unusable input, 4 cannot tell: the job is not seen whole)" >&2
exit 0
