"""`python -m kernelgym` is the `kernelgym` command (a checkout or an unactivated venv has no script on
PATH)."""

from __future__ import annotations

import subprocess
import sys

import kernelgym


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernelgym", *args], check=False, capture_output=True,
                          text=True, timeout=120)


def test_python_m_kernelgym_runs_the_cli():
    done = _run("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"kernelgym {kernelgym.__version__}"


def test_python_m_kernelgym_reports_errors_like_the_script():
    done = _run("tasks", "show", "L1/1_ReLUU")
    assert done.returncode == 1
    assert "Did you mean 'L1/1_ReLU'" in done.stderr
