#!/usr/bin/env bash
# The RL-framework adapters against their real packages (tests/envs/test_{verifiers,openenv}_adapter.py).
# verifiers and openenv-core pin libraries that differ from the agents extra (verifiers: openai<3; the two
# pin different mcp versions), so each gets its own venv under .venv/adapters/, layered over .venv: its own
# packages come first, kernelgym, torch and the rest come from .venv. verifiers' chat harness runs as a uv
# script, so uv is installed beside it (the script's own dependencies come from PyPI on first use).
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/setup.sh
purelib() { "$1" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
extra_requirements() {
  .venv/bin/python -c "import sys, tomllib; print(' '.join(tomllib.load(open('pyproject.toml', 'rb'))\
['project']['optional-dependencies'][sys.argv[1]]))" "$1"
}
main_site=$(purelib .venv/bin/python)
for extra in verifiers openenv; do
  venv=.venv/adapters/$extra
  if [ ! -x "$venv/bin/python" ]; then
    .venv/bin/python -m venv --without-pip "$venv"
    echo "import site; site.addsitedir('$main_site')" > "$(purelib "$venv/bin/python")/zz_kernelgym_main_venv.pth"
  fi
  stamp=$venv/.installed
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    # shellcheck disable=SC2046 - the extra's requirements, one word each
    "$venv/bin/python" -m pip install -q $(extra_requirements "$extra") $([ "$extra" = verifiers ] && echo uv)
    touch "$stamp"
  fi
  PATH="$PWD/$venv/bin:$PATH" "$venv/bin/python" -m pytest -q "tests/envs/test_${extra}_adapter.py" "$@"
done
