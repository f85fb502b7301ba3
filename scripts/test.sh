#!/usr/bin/env bash
# Set up a virtual environment with ccdiag and its test tools, then run the whole test suite.
# Usage: bash scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# requirements.lock pins every dependency (uv pip compile): the versions CI tested
.venv/bin/python -m pip install -q -c requirements.lock -e '.[dev]'
# The capture tests run the CPU build of PyTorch for real; install it when a local wheel is at hand
# (downloading PyPI's default CUDA build would cost gigabytes). Without it those tests skip.
if ! .venv/bin/python -c 'import torch' 2>/dev/null; then
  wheel=$(ls /opt/wheels/torch-2.13.0+cpu-*.whl 2>/dev/null | head -1 || true)
  if [ -n "$wheel" ]; then .venv/bin/python -m pip install -q "$wheel" || echo "warning: torch not installed; capture tests will be skipped"; fi
fi
# Browser tests drive Debian's Chromium through Playwright; install it when we can.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || echo "warning: could not install chromium; browser tests will be skipped"
fi
exec .venv/bin/python -m pytest "$@"
