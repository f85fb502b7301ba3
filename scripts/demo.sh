#!/usr/bin/env bash
# Set up ccdiag in a virtual environment and diagnose a shipped sample pair.
# Usage: bash scripts/demo.sh [BASELINE TREATMENT]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# the versions CI tested; pip's output (setuptools' information-only notes on editable
# installs) is shown only when the install fails
log=$(mktemp)
if ! .venv/bin/python -m pip install -q -c requirements.lock -e . > "$log" 2>&1; then
  cat "$log" >&2; rm -f "$log"; exit 1
fi
rm -f "$log"
if [ $# -ge 2 ]; then
  exec .venv/bin/ccdiag analyze "$1" "$2"
fi
exec .venv/bin/ccdiag analyze sample_traces/decode_eager/baseline.json.gz sample_traces/decode_eager/treatment.json.gz
