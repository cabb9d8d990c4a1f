"""On a real GPU: the task options of issue 30. bf16 runs of five L1 tasks with their honest Triton solutions
are ok; held-out shapes pass for an honest solution; the backward suite's Triton solutions are ok and its
labelled cheats (backward left to PyTorch) are caught.

Run on the H200 host: python -m pytest -m gpu -q -s tests/gpu/test_task_options_gpu.py
"""

import pytest

from kernelgym.evaluation.result import Verdict
from kernelgym.solutions import cheats, examples
from kernelgym.tasks import bundled, bundled_backward

pytestmark = pytest.mark.gpu

BF16_TASKS = ("1_ReLU", "10_Softmax", "11_LogSoftmax", "15_LayerNorm", "16_RMSNorm")


@pytest.fixture(scope="module")
def gpu_pool():
    import torch

    from kernelgym.workers.pool import EvalPool

    if not torch.cuda.is_available():
        pytest.fail("the gpu tests need a CUDA GPU")
    with EvalPool(workers=2) as pool:
        yield pool


def _show(label: str, result) -> None:
    timing = result.timing
    print("\nRESULT", label, result.verdict.value, result.speedup, timing and timing.roofline_fraction,
          result.wall_s, result.stage_s, result.reasons[:1])


@pytest.mark.parametrize("example", examples("triton", "backward"), ids=lambda e: e.task_id)
def test_backward_suite_triton_solutions_are_ok(gpu_pool, example):
    result = gpu_pool.evaluate(bundled_backward().get(example.task_id), example.source, backend="triton",
                               size="gpu")
    _show(f"backward {example.task_id}", result)
    assert result.verdict is Verdict.OK, (result.reasons, result.output_tail[-2000:])
    assert result.timing is not None and result.timing.available and result.speedup > 0


@pytest.mark.parametrize("example", cheats("triton", "backward"), ids=lambda e: f"{e.task_id}:{e.cheat}")
def test_backward_left_to_pytorch_is_caught_on_gpu(gpu_pool, example):
    result = gpu_pool.evaluate(bundled_backward().get(example.task_id), example.source, backend="triton",
                               size="gpu")
    _show(f"cheat {example.task_id} {example.cheat}", result)
    assert result.verdict is Verdict.HACK, result.reasons


@pytest.mark.parametrize("name", BF16_TASKS)
def test_bf16_runs_of_l1_tasks_are_ok_with_honest_triton(gpu_pool, name):
    example = next(e for e in examples("triton") if e.task_id == f"bundled/L1/{name}")
    result = gpu_pool.evaluate(bundled().get(example.task_id), example.source, backend="triton", size="gpu",
                               dtype="bf16")
    _show(f"bf16 {example.task_id}", result)
    assert result.verdict is Verdict.OK, (result.reasons, result.output_tail[-2000:])
    assert result.correctness.atol == pytest.approx(2e-2)


def test_heldout_shapes_pass_for_an_honest_triton_solution(gpu_pool):
    example = next(e for e in examples("triton") if e.task_id == "bundled/L1/1_ReLU")
    result = gpu_pool.evaluate(bundled().get(example.task_id), example.source, backend="triton", size="gpu",
                               shapes="heldout")
    _show("heldout bundled/L1/1_ReLU", result)
    assert result.verdict is Verdict.OK, result.reasons
    assert result.heldout_shapes and all(shape["passed"] for shape in result.heldout_shapes)
