"""KernelBench-style load_inline solutions: built once by the trusted worker, cached, and judged like any
other."""

import time
from pathlib import Path

import pytest

from kernelgym.evaluation.result import Verdict
from kernelgym.tasks import bundled

SOLUTION = (Path(__file__).parents[2] / "benchmarks" / "kernelbench_style"
            / "relu_cpp_load_inline.py").read_text()


@pytest.mark.slow
def test_load_inline_solution_builds_once_and_is_judged(pool):
    task = bundled().get("L1/1_ReLU")
    unique = SOLUTION.replace("#include <torch/extension.h>", "#include <torch/extension.h>\n// test build",
                              1)
    first = pool.evaluate(task, unique, backend="cpp")
    second = pool.evaluate(task, unique, backend="cpp")
    assert first.verdict is Verdict.OK and second.verdict is Verdict.OK, (first.reasons, second.reasons)
    assert second.build.cached and second.build.build_s < 1.0
    assert second.profile.own_kernel_calls >= 1


def test_load_inline_passthrough_in_cpp_is_caught(pool):
    """A C++ extension that calls torch's own op from C++ is still PyTorch compute."""
    task = bundled().get("L1/1_ReLU")
    cheat = SOLUTION.replace("auto y = torch::empty_like(x);", "auto y = torch::relu(x); return y;")
    result = pool.evaluate(task, cheat, backend="cpp")
    assert result.verdict is Verdict.HACK and result.reasons[0].startswith("torch_compute"), result.reasons


def test_the_precompiled_header_command_is_torchs_own_for_the_given_flags():
    from kernelgym.build import torch_pch

    command = torch_pch._torch_pch_command(["-O3", "-fopenmp"])
    assert command is not None, ("torch's precompiled-header builder changed: "
                                 "load_inline builds lose their PCH")
    argv = command["argv"]
    assert "c++-header" in argv and command["header"] in argv and command["pch"] in argv
    assert "-O3" in argv and "-fopenmp" in argv
    assert not any("kernelgym-pch-probe" in arg for arg in argv)


def test_precompiled_headers_are_capped_per_flag_set(tmp_path, monkeypatch):
    from kernelgym.build import torch_pch

    for i in range(torch_pch.MAX_PCH_FLAG_SETS):
        (tmp_path / "torch_pch" / f"{i:016x}" / "torch").mkdir(parents=True)
    monkeypatch.setattr(torch_pch, "_torch_pch_command", lambda flags: pytest.fail("no PCH beyond the cap"))
    assert torch_pch.precompiled_header_dir(["-O2"], tmp_path) is None


def test_a_precompiled_header_that_cannot_be_built_means_a_plain_build(tmp_path, monkeypatch):
    from kernelgym.build import torch_pch

    missing = str(tmp_path / "no" / "extension.h")
    monkeypatch.setattr(torch_pch, "_torch_pch_command",
                        lambda flags: {"argv": ["c++", missing], "header": missing, "pch": missing + ".gch"})
    assert torch_pch.precompiled_header_dir(["-O1"], tmp_path) is None
    assert not any((tmp_path / "torch_pch").glob(".build-*"))  # nothing half-built left behind


@pytest.mark.slow
def test_a_build_in_init_gets_the_build_limit_not_the_run_stage_limit(pool):
    """Many models' answers call load_inline in __init__: the build there is timed against build_timeout_s,
    and a run-stage limit shorter than the build does not end it."""
    task = bundled().get("L1/1_ReLU")
    body = SOLUTION.replace("// test build", "")
    head, tail = body.split("_ext = load_inline(", 1)
    call, _rest = tail.split("\n\n\n", 1)
    in_init = (head + "\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
               "        self.ext = load_inline(" + call.replace("\n", " ") + "\n\n"
               "    def forward(self, x):\n        return self.ext.relu_forward(x.contiguous())\n")
    unique = in_init.replace("#include <torch/extension.h>",  # a source no cache has built before
                             f"#include <torch/extension.h>\n// in init {time.time_ns()}", 1)
    result = pool.evaluate(task, unique, backend="cpp", timeout_s=2.0)
    assert result.verdict is Verdict.OK, result.reasons
    # the build outlasted the stage limit (cached once in CI: the notes say whether it was judged twice)
    assert not result.build.cached and result.build.build_s > 2.0, (result.build, result.static.warnings)


@pytest.mark.slow
def test_import_gets_the_run_limit_and_its_builds_the_build_limit(pool):
    """Importing is a stage like any other: a module that loops at import ends at timeout_s, not at the
    build limit (300 s a step for a reply that loops, as a new user found), while a build at import, longer
    than that limit, still completes."""
    task = bundled().get("L1/1_ReLU")
    fresh = SOLUTION.replace("#include <torch/extension.h>",  # a source no cache has built before
                             f"#include <torch/extension.h>\n// at import {time.time_ns()}", 1)
    started = time.monotonic()
    built = pool.evaluate(task, fresh, backend="cpp", timeout_s=2.0, timing=False)
    assert built.verdict is Verdict.OK, built.reasons
    assert not built.build.cached and built.build.build_s > 2.0
    looping = SOLUTION + "\nimport time\nwhile True:\n    time.sleep(0.1)\n"
    started = time.monotonic()
    result = pool.evaluate(task, looping, backend="cpp", timeout_s=3.0, timing=False)
    assert result.verdict is Verdict.TIMEOUT and "load stage" in str(result.reasons[0]), result.reasons
    assert time.monotonic() - started < 60


BUILD_AFTER_BUILD = """
import time
import torch
from kernelgym.kernels import load_cpp

BODY = r'''
extern "C" void relu(const float* x, float* y, long n) {
    for (long i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : 0;
}
'''
for attempt in range(40):  # a new source each time: no cache helps
    lib = load_cpp(f"// attempt {attempt} {time.time_ns()}\\n" + BODY)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.relu(x, y, x.numel())
        return y
"""


@pytest.mark.slow
def test_the_builds_of_an_evaluation_share_one_budget(pool):
    """Each build used to get build_timeout_s of its own and push the stage's deadline back by its time, so
    a solution asking for build after build held a worker for as long as it liked (a red team's import ran
    22 s against a 5 s limit, unbounded in principle). Now all of an evaluation's builds share one budget."""
    started = time.monotonic()
    result = pool.evaluate(bundled().get("L1/1_ReLU"), BUILD_AFTER_BUILD, backend="cpp", timeout_s=3.0,
                           build_timeout_s=1.0, timing=False)
    assert result.verdict is Verdict.TIMEOUT and "together" in str(result.reasons[0]), result.reasons
    assert time.monotonic() - started < 30
