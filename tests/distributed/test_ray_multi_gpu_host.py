"""The Ray evaluator on a host of several real GPUs (run there: `python -m pytest -q -m gpu
tests/distributed/test_ray_multi_gpu_host.py`): one actor per GPU with its own device, timing slot and cores,
and a batch over the GPUs that survives a killed worker and a killed actor with every verdict `ok`."""

from __future__ import annotations

import os
import signal
import time

import pytest

from kernelgym.evaluation.result import Verdict

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu_pool():
    torch = pytest.importorskip("torch")
    ray = pytest.importorskip("ray")
    if torch.cuda.device_count() < 2:
        pytest.skip("needs a host of at least 2 GPUs")
    from kernelgym.distributed import RayEvalPool

    ray.init(include_dashboard=False, log_to_driver=False)
    try:
        with RayEvalPool(gpu=True) as pool:
            yield pool
    finally:
        ray.shutdown()


def test_one_actor_per_gpu_each_with_its_own_slot_and_cores(gpu_pool):
    import ray
    import torch

    infos = ray.get([actor.info.remote() for actor in gpu_pool.actors])
    gpus = torch.cuda.device_count()
    assert len(infos) == gpus
    assert len({i["cuda_visible_devices"] for i in infos}) == gpus
    assert len({i["lock_dir"] for i in infos}) == gpus
    cores = [set(i["cores"]) for i in infos]
    assert sum(len(c) for c in cores) == len(set().union(*cores))  # disjoint slices
    share = int(ray.cluster_resources()["CPU"]) // gpus
    assert all(i["workers"] == max(1, share // 2) for i in infos)


def _new_relu(tag: str) -> str:
    from kernelgym.solutions import examples

    source = next(e for e in examples("cuda") if e.task_id.endswith("1_ReLU")).source
    return source.replace("__global__", f"/* {tag} {time.time_ns()} */ __global__", 1)


def _busy(actor, need_worker: bool) -> dict:
    import ray

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        info = ray.get(actor.info.remote())
        if info["running"] and (info["worker_pids"] or not need_worker):
            return info
        time.sleep(0.05)
    raise AssertionError("the actor never took an evaluation")


def test_a_batch_over_the_gpus_survives_a_killed_worker_and_a_killed_actor(gpu_pool):
    import ray

    from kernelgym.tasks.loaders import resolve_task

    task = resolve_task("bundled/L1/1_ReLU")
    futures = [gpu_pool.submit(task, _new_relu(f"gpu-fault-{i}"), backend="cuda", size="gpu")
               for i in range(4 * len(gpu_pool.actors))]
    first, second = gpu_pool.actors[:2]
    os.kill(_busy(first, need_worker=True)["worker_pids"][0], signal.SIGKILL)
    killed = _busy(second, need_worker=False)["pid"]
    os.kill(killed, signal.SIGKILL)
    results = [f.result(timeout=900) for f in futures]
    assert [r.verdict for r in results] == [Verdict.OK] * len(futures), [r.reasons[:1] for r in results]
    assert ray.get(second.info.remote())["pid"] != killed
