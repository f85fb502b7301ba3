#!/usr/bin/env bash
# Set up ccdiag in a virtual environment and diagnose a shipped sample pair.
# Usage: bash scripts/demo.sh [BASELINE TREATMENT]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q -c requirements.lock -e .  # the versions CI tested
if [ $# -ge 2 ]; then
  exec .venv/bin/ccdiag analyze "$1" "$2"
fi
exec .venv/bin/ccdiag analyze sample_traces/decode_eager/baseline.json.gz sample_traces/decode_eager/treatment.json.gz
