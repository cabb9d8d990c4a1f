#!/usr/bin/env bash
# The README's first command: install (once), then judge the bundled example solutions and a few cheats.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/setup.sh
. .venv/bin/activate
kernelgym examples --backend cpp --with-cheats "$@"
