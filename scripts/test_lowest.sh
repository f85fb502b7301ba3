#!/usr/bin/env bash
# CI's second job: install the LOWEST versions pyproject.toml allows for every direct dependency
# (runtime and the [dev] tools: uv pip install --resolution lowest-direct) into a separate venv,
# .venv-lowest/, and run the test suite there. It proves the declared minimums work; raise a
# bound in pyproject.toml when this job fails on it, never silence the test.
# Usage: bash scripts/test_lowest.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=.venv-lowest
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "uv==0.13.9"
# --reinstall-package ccdiag: pick up a changed pyproject.toml in a kept venv
"$VENV/bin/python" -m uv pip install -q --python "$VENV/bin/python" \
  --resolution lowest-direct --reinstall-package ccdiag -e '.[dev]'
# the same local CPU PyTorch as scripts/test.sh (uv does not look in the local wheel folder)
if ! "$VENV/bin/python" -c 'import torch' 2>/dev/null; then
  wheel=$(ls /opt/wheels/torch-2.13.0+cpu-*.whl 2>/dev/null | head -1 || true)
  if [ -n "$wheel" ]; then "$VENV/bin/python" -m pip install -q "$wheel" || echo "warning: torch not installed; capture tests will be skipped"; fi
fi
"$VENV/bin/python" -m uv pip list -q --python "$VENV/bin/python" 2>/dev/null \
  | grep -iE '^(polars|dataframely|numpy|msgspec|pydantic|typer|click|rich|markdown-it-py|pyyaml|plotly|dash) ' \
  | tr -s ' ' | sed 's/^/lowest: /' || true
exec "$VENV/bin/python" -m pytest "$@"
