#!/usr/bin/env bash
# The linter over the whole tree, then the test suite on the CPU (GPU tests are marked `gpu` and deselected
# here; run them with -m gpu on a GPU host). The linter's rules are in pyproject.toml ([tool.ruff]).
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/setup.sh
. .venv/bin/activate
python -m ruff check .
python -m pytest -m "not gpu" -q "$@"
