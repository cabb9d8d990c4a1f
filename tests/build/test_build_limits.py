"""Compilers run in the trusted worker with a cap on their heap and on the files they write: a source that
makes the compiler allocate without end (`#include "/dev/zero"`) is a `compile_error`, not the host's OOM
killer (a red-team helper's cc1plus asked for 8 GiB, then 16, on a 24 GiB host)."""

from __future__ import annotations

import resource
import subprocess
import time

from kernelgym.build import serve
from kernelgym.evaluation.result import Verdict
from kernelgym.tasks import bundled


def test_every_compiler_a_build_starts_inherits_the_caps_and_the_worker_gets_its_limits_back():
    before = [resource.getrlimit(r) for r in (resource.RLIMIT_DATA, resource.RLIMIT_FSIZE)]
    with serve.build_limits():
        shown = subprocess.run(["sh", "-c", "ulimit -d"], capture_output=True, text=True, check=True).stdout
    assert int(shown) * 1024 <= serve.build_data_bytes()
    assert [resource.getrlimit(r) for r in (resource.RLIMIT_DATA, resource.RLIMIT_FSIZE)] == before


ENDLESS_INCLUDE = '''
from kernelgym.kernels import load_cpp
import torch.nn as nn

_lib = load_cpp("""
#include "/dev/zero"
extern "C" void relu(const float* x, float* y, long n) {}
""")


class ModelNew(nn.Module):
    def forward(self, x):
        return x.relu()
'''


def test_a_source_that_makes_the_compiler_allocate_without_end_is_a_compile_error(pool):
    started = time.monotonic()
    result = pool.evaluate(bundled().get("L1/1_ReLU"), ENDLESS_INCLUDE, backend="cpp", size="cpu")
    assert result.verdict is Verdict.COMPILE_ERROR, result.reasons
    assert "memory" in (result.build.log + " ".join(result.reasons)).lower(), result.build.log[-500:]
    assert time.monotonic() - started < 120
