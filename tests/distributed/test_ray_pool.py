"""The Ray evaluator on a local Ray cluster (CPU, cpp backend): the same verdicts as EvalPool, an actor killed
mid-evaluation replaced with the evaluation still judged, a bench driver killed and rerun losing nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelgym.distributed.config import parse_evaluator
from kernelgym.distributed.placement import plan
from kernelgym.errors import ConfigError
from kernelgym.evaluation.result import Verdict
from kernelgym.tasks import bundled

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ["L1/1_ReLU", "L1/7_GELU", "L1/23_Sum_Dim"]
# Cheats whose verdict is deterministic (a racing thread's cheat is caught by whichever check it trips first).
CHEATS = ["cpp_constant_output", "cpp_mutate_inputs", "cpp_exit_during_correctness",
          "cpp_patch_model_at_import"]
FAST_JUDGE = {"timing_trials": 10, "timing_budget_s": 0.5}


def test_import_kernelgym_does_not_import_ray():
    code = ("import sys, kernelgym, kernelgym.distributed, kernelgym.distributed.evaluator, kernelgym.envs; "
            "print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _node(node_id: str, cpus: float, gpus: int = 0, alive: bool = True) -> dict:
    resources = {"CPU": cpus, **({"GPU": gpus} if gpus else {})}
    return {"NodeID": node_id, "Alive": alive, "Resources": resources}


def test_placement_one_actor_per_gpu_spread_over_nodes():
    nodes = [_node("a", 128, 8), _node("b", 128, 8), _node("dead", 128, 8, alive=False)]
    slots = plan(nodes, gpu=True, actors=None)
    assert len(slots) == 16 and slots.count("a") == slots.count("b") == 8
    assert plan(nodes, gpu=True, actors=3) == ["a", "b", "a"]
    with pytest.raises(ConfigError, match="16 GPUs"):
        plan(nodes, gpu=True, actors=17)


def test_placement_on_cpu_nodes():
    nodes = [_node("a", 2), _node("b", 16)]
    assert sorted(plan(nodes, gpu=False, actors=None)) == ["a", "a", "b", "b"]  # EvalPool's 2 per machine
    assert plan(nodes, gpu=False, actors=6, cpus_per_actor=2).count("b") == 5  # beyond that, up to the CPUs
    with pytest.raises(ConfigError):
        plan([_node("a", 2)], gpu=False, actors=3)


def test_parse_evaluator():
    assert parse_evaluator("ray") is None
    assert parse_evaluator("ray://auto") == "auto"
    assert parse_evaluator("ray://head:10001") == "ray://head:10001"
    with pytest.raises(ConfigError):
        parse_evaluator("dask")


def test_bench_refuses_an_unknown_evaluator(tmp_path):
    from kernelgym.agents.bench import BenchConfig, run_bench

    config = BenchConfig(env="KernelGym-L1-v0", policy="replay:cpp", tasks="L1/1_ReLU", out=str(tmp_path),
                         evaluator="dask", tensorboard=False)
    with pytest.raises(ConfigError, match="--evaluator"):
        run_bench(config, progress=False)


@pytest.fixture(scope="module")
def ray_pool():
    ray = pytest.importorskip("ray")  # the [dist] extra (CI installs it)
    from kernelgym.distributed import RayEvalPool

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with RayEvalPool(actors=2) as pool:
            yield pool
    finally:
        ray.shutdown()


def _cases() -> list[tuple[str, str]]:
    solutions = ROOT / "kernelgym" / "solutions" / "cpp"
    cases = [(t, next(solutions.glob(f"level*/{t.split('/')[1]}.py")).read_text()) for t in EXAMPLES]
    for name in CHEATS:
        text = (ROOT / "tests" / "adversarial" / f"{name}.py").read_text()
        task = next(line.split(": ", 1)[1].strip() for line in text.splitlines()
                    if line.startswith("# Task: "))
        cases.append((task, text))
    return cases


@pytest.mark.slow
def test_same_verdicts_as_eval_pool(ray_pool, pool):
    cases = _cases()
    tasks = [bundled().get(task_id) for task_id, _ in cases]
    sources = [source for _, source in cases]
    on_ray = list(ray_pool.map(tasks, sources, backend="cpp", **FAST_JUDGE))
    local = [pool.submit(t, s, backend="cpp", **FAST_JUDGE) for t, s in zip(tasks, sources, strict=True)]
    local = [f.result() for f in local]
    got = {(t.id, i): r.verdict for i, (t, r) in enumerate(zip(tasks, on_ray, strict=True))}
    want = {(t.id, i): r.verdict for i, (t, r) in enumerate(zip(tasks, local, strict=True))}
    detail = {t.id: (a.verdict.value, a.reasons, b.verdict.value, b.reasons)
              for t, a, b in zip(tasks, on_ray, local, strict=True) if a.verdict is not b.verdict}
    assert got == want, detail
    assert [r.verdict for r in on_ray[: len(EXAMPLES)]] == [Verdict.OK] * len(EXAMPLES)
    assert all(r.verdict is not Verdict.OK for r in on_ray[len(EXAMPLES):])
    assert all(s["done"] > 0 for s in ray_pool.stats())  # both actors took work


@pytest.mark.slow
def test_vector_envs_and_the_trl_adapter_take_the_ray_pool(ray_pool, relu_solution):
    import gymnasium as gym

    from kernelgym.envs.trl_adapter import KernelToolEnv

    fenced = f"```python\n{relu_solution}\n```"
    envs = gym.make_vec("KernelGym-L1-v0", num_envs=2, vectorization_mode="sync", size="cpu", backend="cpp",
                        pool=ray_pool, eval_options=FAST_JUDGE)
    try:
        assert all(env.unwrapped._pool is ray_pool for env in envs.envs)
        envs.reset(seed=1, options={"task_id": "L1/1_ReLU"})
        _, rewards, *_, infos = envs.step((fenced, fenced))
        assert list(infos["verdict"]) == ["ok", "ok"] and (rewards > 0).all()
    finally:
        envs.close()
    tool_env = KernelToolEnv("KernelGym-L1-v0", pool=ray_pool, size="cpu", backend="cpp",
                             eval_options=FAST_JUDGE)
    tool_env.reset(task_id="L1/1_ReLU")
    assert tool_env._env.unwrapped._pool is ray_pool
    assert "ok" in tool_env.submit_kernel(relu_solution).lower() and tool_env.get_reward() > 0


@pytest.mark.slow
def test_an_actor_killed_mid_evaluation_is_replaced_and_the_evaluation_judged(ray_pool, relu_task,
                                                                              relu_solution):
    import ray

    actor = ray_pool.actors[0]
    before = ray.get(actor.info.remote())
    futures = [ray_pool.submit(relu_task, relu_solution, backend="cpp", **FAST_JUDGE) for _ in range(2)]
    deadline = time.monotonic() + 120
    while not ray.get(actor.info.remote())["running"]:  # the actor has an evaluation in hand
        assert time.monotonic() < deadline and not all(f.done() for f in futures)
        time.sleep(0.05)
    os.kill(before["pid"], signal.SIGKILL)
    results = [f.result(timeout=300) for f in futures]
    assert [r.verdict for r in results] == [Verdict.OK, Verdict.OK], [r.reasons for r in results]
    after = ray.get(actor.info.remote())
    assert after["pid"] != before["pid"]  # a new actor process stands in the same slot


@pytest.mark.slow
def test_bench_on_ray_loses_nothing_when_the_driver_is_killed(tmp_path):
    pytest.importorskip("ray")
    out = tmp_path / "run"
    command = [sys.executable, "-m", "kernelgym.agents.bench_cli", "--env", "KernelGym-L1-v0",
               "--policy", "replay:cpp", "--baseline", "one_shot", "--tasks", ",".join(EXAMPLES[:2]),
               "--out", str(out), "--no-tensorboard", "--evaluator", "ray", "--concurrency", "2",
               *[a for k, v in FAST_JUDGE.items() for a in ("--eval-option", f"{k}={v}")]]
    results = out / "results.jsonl"
    # Its own session: the kill takes the driver and the local Ray cluster it started, as a machine crash
    # would.
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not (results.exists() and results.read_text().strip()):
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    before = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=400, check=False,
                              start_new_session=True)
    assert finished.returncode == 0, finished.stderr[-2000:]
    after = [json.loads(line) for line in results.read_text().splitlines()]
    assert sorted(r["task_id"].split("/", 1)[1] for r in after) == sorted(EXAMPLES[:2])
    assert after[: len(before)] == before  # kept as they were, none judged twice
