"""Compilers run below normal priority, so a build never slows the evaluation being timed beside it."""

import os
import subprocess

from kernelgym import kernels


def test_compilers_run_niced_and_a_missing_compiler_is_still_reported_as_missing():
    expected = min(19, os.nice(0) + kernels.BUILD_NICENESS)
    printed = subprocess.run(kernels.niced(["nice"]), capture_output=True, text=True, check=True).stdout
    assert int(printed) == expected  # `nice` with no command prints the niceness it runs at
    assert kernels.niced(["no-such-compiler", "-c", "x.cpp"]) == ["no-such-compiler", "-c", "x.cpp"]


def test_a_lean_build_still_builds_and_reports_its_errors():
    nonce = os.urandom(4).hex()
    library = kernels.load_cpp(f'extern "C" int kg_answer_{nonce}() {{ return 42; }}')
    assert library._path.exists()
    try:
        kernels.load_cpp(f"int broken_{nonce}( {{")
    except kernels.BuildError as error:
        assert "error" in error.log
    else:
        raise AssertionError("a syntax error built")
