"""Vector envs: sync envs share one pool; async envs (subprocesses) each use their process's default pool."""

from __future__ import annotations

import multiprocessing as mp

import gymnasium as gym
import pytest
from kg_env_helpers import fenced

from kernelgym.solutions import examples

FAST = {"timing_trials": 10, "timing_budget_s": 0.5}


@pytest.fixture(scope="module")
def relu_source():
    return next(e for e in examples("cpp") if e.task_id == "bundled/L1/1_ReLU").source


def _first_lines(obs) -> list[str]:
    return [p.split("\n", 1)[0] for p in obs["prompt"]]


def test_sync_vector_env_shares_the_pool(pool, relu_source, kernelbench_root):
    envs = gym.make_vec("KernelGym-L1-v0", num_envs=2, vectorization_mode="sync", size="cpu", backend="cpp",
                        pool=pool, eval_options=FAST)
    assert all(env.unwrapped._pool is pool for env in envs.envs)
    obs, infos = envs.reset(seed=11, options={"task_id": "L1/1_ReLU"})
    assert len(obs["prompt"]) == 2 and list(infos["task_id"]) == ["bundled/L1/1_ReLU"] * 2
    obs, rewards, terminated, truncated, infos = envs.step(("no code", fenced(relu_source)))
    assert rewards[0] == -1.0 and rewards[1] >= 0.1
    assert list(infos["verdict"]) == ["no_code", "ok"] and not terminated.any() and not truncated.any()
    # Infos of different outcomes batch together: a value missing in one env is masked, not a crash.
    assert infos["result"]["correct"].tolist() == [False, True] and infos["_best"].tolist() == [False, True]
    obs, rewards, terminated, truncated, infos = envs.step(("DONE", fenced(relu_source)))
    assert terminated.tolist() == [True, False] and infos["_result"].tolist() == [False, True]
    envs.close()

    # Reproducible: the same seeds give the same tasks, in another vector env too.
    kb = {"kernelbench_root": str(kernelbench_root)}
    a = gym.make_vec("KernelBench-L1-v0", num_envs=3, vectorization_mode="sync", **kb)
    b = gym.make_vec("KernelBench-L1-v0", num_envs=3, vectorization_mode="sync", **kb)
    assert _first_lines(a.reset(seed=5)[0]) == _first_lines(b.reset(seed=5)[0])
    a.close()
    b.close()


@pytest.mark.slow
def test_async_vector_env(relu_source, kernelbench_root):
    envs = gym.make_vec("KernelGym-L1-v0", num_envs=2, vectorization_mode="async", size="cpu", backend="cpp",
                        eval_options=FAST, max_turns=2)
    try:
        obs, infos = envs.reset(seed=[1, 2], options={"task_id": "L1/1_ReLU"})
        # text survives shared memory
        assert all(p.startswith("Task: bundled/L1/1_ReLU") for p in obs["prompt"])
        obs, rewards, terminated, truncated, infos = envs.step(("just talk", fenced(relu_source)))
        assert rewards[0] == -1.0 and rewards[1] >= 0.1
        assert list(infos["verdict"]) == ["no_code", "ok"]
        assert "Verdict: ok" in obs["feedback"][1]
        obs, rewards, terminated, truncated, infos = envs.step(("DONE", "more talk"))
        assert terminated.tolist() == [True, False] and truncated[1]  # TimeLimit(max_turns=2) truncates
    finally:
        envs.close()

    kb = {"kernelbench_root": str(kernelbench_root)}
    a = gym.make_vec("KernelBench-L1-v0", num_envs=2, vectorization_mode="async", **kb)
    b = gym.make_vec("KernelBench-L1-v0", num_envs=2, vectorization_mode="sync", **kb)
    try:
        assert _first_lines(a.reset(seed=9)[0]) == _first_lines(b.reset(seed=9)[0])
    finally:
        a.close()
        b.close()


def _child_pool_state(queue):
    from kernelgym.workers import pool

    inherited = pool._default_pool
    queue.put(inherited is None)


def test_a_forked_child_does_not_reuse_the_parents_pool():
    from kernelgym.envs import kernel_env

    parent_pool = kernel_env.shared_pool()  # created lazily: no worker starts before an evaluation
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child_pool_state, args=(queue,))
    child.start()
    child.join(60)
    assert queue.get(timeout=5) is True
    assert kernel_env.shared_pool() is parent_pool


def test_a_pool_is_shared_not_copied(pool):
    import copy
    import pickle

    from kernelgym.envs import kernel_env

    assert copy.deepcopy(pool) is pool  # gymnasium deep-copies specs, whose kwargs hold the pool
    assert pickle.loads(pickle.dumps(pool)) is kernel_env.shared_pool()  # another process: its own pool
