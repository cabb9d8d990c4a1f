"""Roofline: FLOPs and bytes of a task, the floor they imply, and the line in the feedback."""

import torch

from kernelgym.evaluation.feedback import render_feedback
from kernelgym.evaluation.result import Verdict
from kernelgym.evaluation.roofline import Peaks, TaskCost, floor_ms, task_cost
from kernelgym.solutions import examples
from kernelgym.tasks import bundled


def test_matmul_cost_counts_two_flops_per_multiply_add():
    model = torch.nn.Linear(64, 32, bias=False)
    x = torch.rand(16, 64)
    cost = task_cost(model, [x], [model(x)])
    assert cost.flops == 2 * 16 * 64 * 32
    assert cost.min_bytes == 4 * (16 * 64 + 64 * 32 + 16 * 32)


def test_floor_picks_the_binding_resource():
    peaks = Peaks(bandwidth_gbs=1000.0, matmul_tflops=100.0)
    assert floor_ms(TaskCost(flops=0.0, min_bytes=1e9), peaks) == (1.0, "memory")
    assert floor_ms(TaskCost(flops=1e12, min_bytes=1e6), peaks) == (10.0, "compute")


def test_evaluation_reports_its_place_on_the_roofline(pool):
    example = next(e for e in examples("cpp") if "Matmul" in e.task_id)
    result = pool.evaluate(bundled().get(example.task_id), example.source, backend="cpp")
    assert result.verdict is Verdict.OK, result.reasons
    timing = result.timing
    assert timing.bound == "compute" and timing.flops > 0 and timing.floor_ms > 0
    assert timing.roofline_fraction == round(timing.floor_ms / timing.candidate.median_ms, 4)
    assert "of roofline" in render_feedback(result)


def test_a_tasks_counted_cost_is_kept_for_later_evaluations(pool):
    """Counting a task's FLOPs runs the FLOP counter, whose first use in a process imports torch._dynamo:
    the worker no longer preloads it, so the count is made once per task and machine and then read from the
    cache. A cache entry changed by hand shows in the next evaluation (so the count was not made again)."""
    import json

    from kernelgym import kernels

    example = next(e for e in examples("cpp") if "Matmul" in e.task_id)
    task = bundled().get(example.task_id)
    first = pool.evaluate(task, example.source, backend="cpp")
    assert first.verdict is Verdict.OK, first.reasons
    path = kernels.cache_root() / "task_costs.json"
    saved = path.read_text()
    entries = json.loads(saved)
    counted = [k for k, v in entries.items() if v["flops"] == first.timing.flops]
    assert counted, entries
    try:
        path.write_text(json.dumps({**entries, **{k: {**entries[k], "flops": 3 * first.timing.flops}
                                                 for k in counted}}))
        again = pool.evaluate(task, example.source, backend="cpp")
        assert again.timing.flops == 3 * first.timing.flops
    finally:
        path.write_text(saved)
