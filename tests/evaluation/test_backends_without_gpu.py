"""Triton and CUDA on a machine without a GPU: interpreter correctness, compile-only CUDA."""

import shutil

import pytest

from kernelgym.evaluation.feedback import render_feedback
from kernelgym.evaluation.result import Verdict
from kernelgym.solutions import examples
from kernelgym.tasks import bundled


@pytest.fixture(scope="module")
def cpu_pool():
    from kernelgym.workers.pool import EvalPool

    with EvalPool(workers=1, gpu=False) as pool:
        yield pool


def test_triton_runs_in_the_interpreter_and_says_timing_is_unavailable(cpu_pool):
    example = examples("triton")[0]
    result = cpu_pool.evaluate(bundled().get(example.task_id), example.source, backend="triton")
    assert result.verdict is Verdict.OK, (result.reasons, result.output_tail[-2000:])
    assert result.correctness.passed and not result.timing.available
    assert "interpreter" in result.timing.reason and result.speedup is None
    assert "interpreter" in render_feedback(result)


def test_wrong_triton_kernel_is_incorrect_in_the_interpreter(cpu_pool):
    example = examples("triton")[0]
    wrong = example.source.replace("tl.maximum(x, 0.0)", "tl.minimum(x, 0.0)")
    result = cpu_pool.evaluate(bundled().get(example.task_id), wrong, backend="triton")
    assert result.verdict is Verdict.INCORRECT


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_cuda_compiles_only_and_says_it_could_not_run(cpu_pool):
    example = examples("cuda")[0]
    result = cpu_pool.evaluate(bundled().get(example.task_id), example.source, backend="cuda")
    assert result.build.compiled and not result.build.runnable
    assert result.verdict is Verdict.RUNTIME_ERROR and result.reasons[0].startswith("no_gpu")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_cuda_compile_errors_reach_the_agent(cpu_pool):
    example = examples("cuda")[0]
    broken = example.source.replace("fmaxf(v.x, 0.f)", "fmaxf(v.x, undefined_thing)")
    result = cpu_pool.evaluate(bundled().get(example.task_id), broken, backend="cuda")
    assert result.verdict is Verdict.COMPILE_ERROR
    assert "undefined_thing" in render_feedback(result)


@pytest.mark.slow
@pytest.mark.parametrize("example", examples("triton"), ids=lambda e: e.task_id)
def test_every_triton_example_is_correct_in_the_interpreter(cpu_pool, example):
    result = cpu_pool.evaluate(bundled().get(example.task_id), example.source, backend="triton")
    assert result.verdict is Verdict.OK, (result.reasons, result.output_tail[-1500:])


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.parametrize("example", examples("cuda"), ids=lambda e: e.task_id)
def test_every_cuda_example_compiles(cpu_pool, example):
    result = cpu_pool.evaluate(bundled().get(example.task_id), example.source, backend="cuda")
    assert result.build.compiled and result.reasons[0].startswith("no_gpu"), result.reasons
