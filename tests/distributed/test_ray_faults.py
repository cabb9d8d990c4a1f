"""Faults of the Ray evaluator's own processes while a batch is in flight over two actors: a worker killed
inside one actor, the other actor's process killed. Every evaluation comes back with the verdict an
undisturbed run gives (none lost, none charged to the candidate); an actor lost for good is
`infrastructure_error` (not judged), never a candidate's `crash`."""

from __future__ import annotations

import os
import signal
import time

import pytest

from kernelgym.evaluation.result import Verdict
from kernelgym.rewards import judged

FAST_JUDGE = {"timing_trials": 10, "timing_budget_s": 0.5}


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")  # the [dist] extra (CI installs it)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def _new_relu(relu_solution: str, tag: str) -> str:
    """The bundled ReLU as a source no build cache has seen (the cache is shared on this machine)."""
    return relu_solution.replace("#include <cstdint>", f"#include <cstdint>\n// {tag} {time.time_ns()}", 1)


def _wait_busy(ray, actor, need_worker: bool, futures: list, timeout_s: float = 180) -> dict:
    """The actor's info once it holds an evaluation (and, if asked, a live worker judging it)."""
    deadline = time.monotonic() + timeout_s
    while True:
        info = ray.get(actor.info.remote())
        if info["running"] and (info["worker_pids"] or not need_worker):
            return info
        assert time.monotonic() < deadline, "the actor never took an evaluation"
        assert not all(f.done() for f in futures), "the batch ended before the fault could be injected"
        time.sleep(0.05)


@pytest.mark.slow
def test_a_batch_survives_a_killed_worker_and_a_killed_actor(ray_cluster, relu_task, relu_solution):
    from kernelgym.distributed import RayEvalPool

    ray = ray_cluster
    with RayEvalPool(actors=2) as pool:
        sources = [_new_relu(relu_solution, f"fault-batch-{i}") for i in range(6)]
        futures = [pool.submit(relu_task, s, backend="cpp", **FAST_JUDGE) for s in sources]
        first, second = pool.actors
        worker = _wait_busy(ray, first, need_worker=True, futures=futures)
        os.kill(worker["worker_pids"][0], signal.SIGKILL)  # a judge's worker dies mid-evaluation
        actor = _wait_busy(ray, second, need_worker=False, futures=futures)
        os.kill(actor["pid"], signal.SIGKILL)  # a whole actor dies (as on a lost node or the OOM killer)
        results = [f.result(timeout=600) for f in futures]
        assert [r.verdict for r in results] == [Verdict.OK] * 6, [r.reasons for r in results]
        assert all(judged(r) for r in results)
        assert ray.get(first.info.remote())["rejudged"] >= 1  # re-run on a fresh worker, not charged
        assert ray.get(second.info.remote())["pid"] != actor["pid"]  # replaced in the same slot
        assert sum(s["done"] for s in pool.stats()) == 6 and all(s["in_flight"] == 0 for s in pool.stats())


@pytest.mark.slow
def test_an_actor_lost_for_good_is_not_judged_rather_than_charged(ray_cluster, relu_task, relu_solution):
    from kernelgym.distributed import RayEvalPool

    ray = ray_cluster
    with RayEvalPool(actors=1, max_attempts=1) as pool:  # no second attempt: the first death is final
        future = pool.submit(relu_task, _new_relu(relu_solution, "fault-final"), backend="cpp", **FAST_JUDGE)
        info = _wait_busy(ray, pool.actors[0], need_worker=False, futures=[future])
        os.kill(info["pid"], signal.SIGKILL)
        result = future.result(timeout=300)
    assert result.verdict is Verdict.INFRASTRUCTURE_ERROR and not judged(result)
    assert result.reasons[0].rule == "infrastructure_error"
