#!/usr/bin/env bash
# The test suite on the CPU (GPU tests are marked `gpu` and deselected here; run them with -m gpu on a GPU host).
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/setup.sh
. .venv/bin/activate
python -m pytest -m "not gpu" -q "$@"
