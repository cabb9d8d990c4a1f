#!/usr/bin/env bash
# The README's first command: install (once), then benchmark the replay of the bundled example solutions and
# a few cheats on the bundled suite (cpu size, cpp backend): a report with verified speedups and rejected cheats.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/setup.sh
. .venv/bin/activate
kernelgym bench "$@"
