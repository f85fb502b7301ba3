#!/usr/bin/env bash
# CI's second job: the LOWEST versions pyproject.toml allows for every direct dependency
# (runtime and the [dev] tools; `uv pip compile --resolution lowest-direct`), installed exactly
# (`uv pip sync`) into a separate venv, .venv-lowest/, and the test suite run there. It proves
# the declared minimums work: when it fails on one, raise that bound in pyproject.toml.
# Usage: bash scripts/test_lowest.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=.venv-lowest
TOOLS=.venv-tools  # uv lives outside the venv it syncs (sync removes what the list lacks)
[ -x "$TOOLS/bin/uv" ] || { "$PY" -m venv "$TOOLS" && "$TOOLS/bin/python" -m pip install -q "uv==0.13.9"; }
UV="$TOOLS/bin/uv"
[ -x "$VENV/bin/python" ] || "$UV" venv -q --python "$PY" "$VENV"
"$UV" pip compile -q --resolution lowest-direct --python "$VENV/bin/python" \
  pyproject.toml --extra dev -o "$VENV/lowest.txt"
# exactly these versions (sync also removes what a kept venv had from an earlier run)
"$UV" pip sync -q --python "$VENV/bin/python" "$VENV/lowest.txt"
"$UV" pip install -q --python "$VENV/bin/python" --no-deps -e .
"$UV" pip install -q --python "$VENV/bin/python" pip  # tests/test_architecture.py installs with pip
# the same local CPU PyTorch as scripts/test.sh (uv does not look in the local wheel folder)
wheel=$(ls /opt/wheels/torch-2.13.0+cpu-*.whl 2>/dev/null | head -1 || true)
if [ -n "$wheel" ]; then
  "$UV" pip install -q --python "$VENV/bin/python" "$wheel" || echo "warning: torch not installed; capture tests will be skipped"
fi
echo "lowest versions: $(grep -iE '^(polars|dataframely|numpy|msgspec|pydantic|typer|rich|markdown-it-py|pyyaml|plotly|dash)==' "$VENV/lowest.txt" | tr '\n' ' ')"
exec "$VENV/bin/python" -m pytest "$@"
