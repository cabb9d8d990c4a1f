#!/usr/bin/env bash
# The linter over the whole tree, then the test suite on the CPU (GPU tests are marked `gpu` and deselected
# here; run them with -m gpu on a GPU host). The linter's rules are in pyproject.toml ([tool.ruff]).
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/setup.sh
. .venv/bin/activate
python -m ruff check .
# The adapter tests need their libraries' own pins: .ci/adapters.sh runs them, each in its own venv.
python -m pytest -m "not gpu" -q --ignore=tests/envs/test_verifiers_adapter.py \
  --ignore=tests/envs/test_openenv_adapter.py "$@"
bash .ci/adapters.sh
