"""Placement of the Ray evaluator on a node of several GPUs: one actor per GPU, each with its own GPU, timing
slot (lock folder) and slice of the node's cores, with as many workers as its share of the cores feeds.

The GPUs are declared to a local CPU cluster (`ray.init(num_gpus=2)`): Ray hands them out as it would real
ones (ids, CUDA_VISIBLE_DEVICES, reserved CPUs), and nothing here runs on them."""

from __future__ import annotations

import os

import pytest

from kernelgym.distributed.placement import actor_shape, core_slice, gpu_share_of_cpus, plan


def _node(node_id: str, cpus: float, gpus: int = 0) -> dict:
    return {"NodeID": node_id, "Alive": True, "Resources": {"CPU": cpus, **({"GPU": gpus} if gpus else {})}}


@pytest.mark.parametrize(("cpus", "gpus", "want_cpus", "want_workers"), [
    (16, 1, 16, 8),  # one H200 host: EvalPool's 8 workers on 16 cores
    (64, 4, 16, 8),  # the 4-GPU host
    (128, 8, 16, 8),  # the 8-GPU host
    (8, 2, 4, 2),
    (3, 2, 1, 1),  # a spare core stays with Ray
    (1, 2, 0.5, 1),
])
def test_a_gpu_actor_takes_its_gpus_share_of_the_cores(cpus, gpus, want_cpus, want_workers):
    shape = actor_shape(_node("a", cpus, gpus), gpu=True, cpus_per_actor=None, workers=None)
    assert (shape.cpus, shape.workers) == (want_cpus, want_workers)
    assert shape.cpus * gpus <= cpus  # Ray can place every GPU's actor
    assert gpu_share_of_cpus(cpus, gpus) == want_cpus


def test_explicit_cpus_and_workers_win():
    shape = actor_shape(_node("a", 64, 4), gpu=True, cpus_per_actor=4, workers=3)
    assert (shape.cpus, shape.workers, shape.cpu_fraction) == (4, 3, 4 / 64)
    assert plan([_node("a", 8, 4)], gpu=True, actors=None, cpus_per_actor=4) == ["a", "a"]  # CPUs bound it
    cpu = actor_shape(_node("a", 16), gpu=False, cpus_per_actor=None, workers=None)
    assert (cpu.cpus, cpu.workers) == (1.0, 1)


def test_core_slices_of_one_node_are_disjoint_and_cover_it():
    cores = list(range(128))
    slices = [core_slice(cores, 1 / 8, rank) for rank in range(8)]
    assert all(len(s) == 16 for s in slices)
    assert sorted(c for s in slices for c in s) == cores
    assert core_slice([0, 1], 0.5, 1) == [1] and core_slice([0, 1], 0.5, 2) == [0]  # a rank wraps around
    assert core_slice([3], 0.25, 5) == [3]  # never empty


@pytest.fixture(scope="module")
def fake_gpu_node():
    ray = pytest.importorskip("ray")  # the [dist] extra (CI installs it)
    # 8 CPUs declared, whatever the machine has: each GPU's share is 4, so 2 workers an actor.
    ray.init(num_cpus=8, num_gpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def test_each_gpu_gets_its_own_actor_slot_and_cores(fake_gpu_node):
    from kernelgym.distributed import RayEvalPool, RayPoolConfig
    from kernelgym.workers.pool import PoolConfig

    ray = fake_gpu_node
    # No background warm-up build and no worker started: this test places actors, it judges nothing.
    config = RayPoolConfig(gpu=True, pool=PoolConfig(warm_builds=False, prestart=False))
    with RayEvalPool(config) as pool:
        infos = ray.get([actor.info.remote() for actor in pool.actors])
        assert len(infos) == 2  # one actor per GPU
        assert sorted(i["gpu_ids"][0] for i in infos) == ["0", "1"]
        assert sorted(i["cuda_visible_devices"] for i in infos) == ["0", "1"]
        assert len({i["lock_dir"] for i in infos}) == 2
        assert sorted(os.path.basename(i["lock_dir"]) for i in infos) == ["gpu-0", "gpu-1"]
        assert [i["workers"] for i in infos] == [2, 2] and pool.size == 4
        assert [s["workers"] for s in pool.stats()] == [2, 2]
        # Ray's own accounting: the two actors reserve the node's every CPU and GPU between them.
        assert ray.available_resources().get("CPU", 0) == 0
        assert ray.available_resources().get("GPU", 0) == 0
        physical = len(os.sched_getaffinity(0))
        cores = [set(i["cores"]) for i in infos]
        assert all(len(c) == max(1, physical // 2) for c in cores)
        if physical >= 2:
            assert not cores[0] & cores[1]  # each GPU's builds and timed processes on cores of its own
