"""Bad input and faults on the cpp backend: a clear verdict every time, and the pool keeps working."""

from pathlib import Path

import pytest

from kernelgym.evaluation.feedback import render_feedback
from kernelgym.evaluation.result import Verdict

CPP_HEADER = '''
import torch
import torch.nn as nn
from kernelgym.kernels import load_cpp
'''

SEGFAULT = CPP_HEADER + '''
lib = load_cpp(r"""
#include <cstdint>
extern "C" void boom(float* y, int64_t n) {
    float* p = nullptr;
    for (int64_t i = 0; i < n; ++i) p[i * 1000003] = y[i];
}
""")

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.boom(y, y.numel())
        return y
'''

INFINITE_LOOP = CPP_HEADER + '''
lib = load_cpp(r"""
#include <cstdint>
extern "C" void spin(const float* x, float* y, int64_t n) {
    volatile int64_t i = 0;
    while (true) { i = i + 1; }
}
""")

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.spin(x, y, x.numel())
        return y
'''

EXIT_IN_FORWARD = CPP_HEADER + '''
lib = load_cpp(r"""
#include <cstdint>
#include <unistd.h>
extern "C" void relu(const float* x, float* y, int64_t n) { _exit(3); }
""")

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.relu(x.contiguous(), y, x.numel())
        return y
'''

EXIT_IN_PYTHON = CPP_HEADER + '''
import os
lib = load_cpp(r"""
#include <cstdint>
extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : 0;
}
""")

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.relu(x.contiguous(), y, x.numel())
        os._exit(3)
        return y
'''

LOUD_IMPORT = '''
print("x" * 50_000_000)
''' + (Path(__file__).parents[2] / "kernelgym" / "solutions" / "cpp" / "level1" / "1_ReLU.py").read_text()

COMPILE_ERROR = CPP_HEADER + '''
lib = load_cpp(r"""extern "C" void relu(const float* x, float* y, long n) { this is not C++; }""")

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.relu(x, y, x.numel())
        return y
'''

WRONG_SIGNATURE = CPP_HEADER + '''
lib = load_cpp(r"""
#include <cstdint>
extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : 0;
}
""")

class ModelNew(nn.Module):
    def forward(self, x, scale):
        y = torch.empty_like(x)
        lib.relu(x, y, x.numel())
        return y
'''

NO_MODEL_NEW = CPP_HEADER + '''
lib = load_cpp("extern \\"C\\" void f() {}")

class Something(nn.Module):
    def forward(self, x):
        lib.f()
        return x
'''

BAD_INPUTS = {
    "empty": ("", Verdict.COMPILE_ERROR, "empty_source"),
    "garbage": ("def )(:\n  ???", Verdict.COMPILE_ERROR, "syntax_error"),
    "non_utf8": (b"\xff\xfe\x00import torch\x80\x81", Verdict.COMPILE_ERROR, "syntax_error"),
    "ten_megabytes": ("#" * 10_000_000, Verdict.COMPILE_ERROR, "source_too_large"),
    "no_model_new": (NO_MODEL_NEW, Verdict.COMPILE_ERROR, "no_model_new"),
    "compile_error": (COMPILE_ERROR, Verdict.COMPILE_ERROR, "compile_error"),
    "wrong_signature": (WRONG_SIGNATURE, Verdict.RUNTIME_ERROR, "runtime_error"),
    # an exit is no result: the failure reward
    "os_exit_in_forward": (EXIT_IN_PYTHON, Verdict.CRASH, "crash"),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_gets_a_clear_verdict(pool, relu_task, relu_solution, name):
    source, verdict, reason = BAD_INPUTS[name]
    result = pool.evaluate(relu_task, source, backend="cpp")
    assert result.verdict is verdict, result.reasons
    assert any(r.startswith(reason) for r in result.reasons), result.reasons
    assert render_feedback(result).startswith(f"Verdict: {verdict.value}")
    # The very next evaluation in the same pool is fine.
    assert pool.evaluate(relu_task, relu_solution, backend="cpp", timing=False).verdict is Verdict.OK


def test_compile_error_feedback_shows_the_compiler_line(pool, relu_task):
    result = pool.evaluate(relu_task, COMPILE_ERROR, backend="cpp")
    assert "error" in result.build.log and "kernel.cpp" in result.build.log
    assert "this is not C++" in render_feedback(result)


@pytest.mark.parametrize(
    "source, verdict, reason",
    [
        (SEGFAULT, Verdict.CRASH, "crash: the candidate's process killed by signal SIGSEGV"),
        (INFINITE_LOOP, Verdict.TIMEOUT, "timeout: the correctness stage"),
        (EXIT_IN_FORWARD, Verdict.CRASH, "crash: the candidate's process exited with status 3"),
    ],
    ids=["segfault", "infinite_loop", "exit_in_forward"],
)
def test_faults_end_with_the_right_verdict_and_the_pool_recovers(pool, relu_task, relu_solution, source,
                                                                 verdict, reason):
    result = pool.evaluate(relu_task, source, backend="cpp", timeout_s=3)
    assert result.verdict is verdict, result.reasons
    assert any(r.startswith(reason) for r in result.reasons), result.reasons
    assert pool.evaluate(relu_task, relu_solution, backend="cpp", timing=False).verdict is Verdict.OK


def test_fifty_megabytes_printed_at_import_still_gives_a_usable_result(pool, relu_task):
    result = pool.evaluate(relu_task, LOUD_IMPORT, backend="cpp", timing=False)
    assert result.verdict is Verdict.OK, result.reasons
    assert "bytes of output cut" in result.output_tail
    assert len(result.output_tail) < 10_000


def test_api_never_raises_for_a_bad_submission(relu_task):
    import kernelgym

    result = kernelgym.evaluate(relu_task, None if False else "\x00", backend="cpp")
    assert result.verdict is Verdict.COMPILE_ERROR


BROKEN_REFERENCE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        raise ValueError("this task's reference is broken")


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
"""


def _children(pid: int) -> list[int]:
    from pathlib import Path

    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def test_a_broken_reference_is_reported_and_leaves_no_process_behind(relu_solution):
    """The candidate's process starts while the reference computes; no process outlives the verdict."""
    from kernelgym.tasks import task_from_source
    from kernelgym.workers.pool import EvalPool

    task = task_from_source(BROKEN_REFERENCE, suite="user", level=1, file_name="1_BrokenReLU.py")
    with EvalPool(workers=1, gpu=False) as pool:
        result = pool.evaluate(task, relu_solution, backend="cpp")
        worker_pid = pool._workers[0].process.pid
        left = _children(worker_pid)
        # still serving
        assert pool.evaluate(task, relu_solution, backend="cpp").verdict is Verdict.RUNTIME_ERROR
    assert result.verdict is Verdict.RUNTIME_ERROR
    assert result.reasons[0].startswith("reference_failed") and "broken" in result.reasons[0]
    assert left == [], f"evaluation processes still running after the verdict: {left}"


BUILD_FAILS = """
import torch
import torch.nn as nn
from kernelgym.kernels import load_cpp

lib = load_cpp(r\"\"\"
extern "C" void relu(const float* x, float* y, long n) { this does not compile }
\"\"\")


class ModelNew(nn.Module):
    def forward(self, x):
        return x
"""


def test_a_broken_task_is_named_before_the_candidates_own_failure(pool):
    """The candidate loads while the reference builds its model and first call; when both fail, the verdict
    is still the task's, as when the reference finished first."""
    from kernelgym.tasks import task_from_source

    task = task_from_source(BROKEN_REFERENCE, suite="user", level=1, file_name="1_BrokenReLU.py")
    result = pool.evaluate(task, BUILD_FAILS, backend="cpp")
    assert result.reasons[0].startswith("reference_failed") and "broken" in result.reasons[0], result.reasons
