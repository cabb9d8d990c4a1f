"""Episodes on the real judge (cpp backend on the CPU): rewards, termination, info, trajectories, seeding."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence
from kg_env_helpers import fenced

from kernelgym.envs import KernelEnv, read_episodes
from kernelgym.errors import ConfigError, TaskNotFoundError
from kernelgym.evaluation.feedback import render_feedback
from kernelgym.evaluation.result import EvalResult
from kernelgym.solutions import cheats, examples

FAST = {"timing_trials": 20, "timing_budget_s": 1.0}  # keeps each evaluation around a second


@pytest.fixture(scope="module")
def relu_source():
    return next(e for e in examples("cpp") if e.task_id == "bundled/L1/1_ReLU").source


def make(pool, **kwargs) -> gym.Env:
    kwargs.setdefault("eval_options", FAST)
    return gym.make("KernelGym-L1-v0", size="cpu", backend="cpp", pool=pool, **kwargs)


def test_episode_replaying_the_bundled_solution(pool, relu_source, tmp_path):
    path = tmp_path / "runs" / "traj.jsonl"
    env = make(pool, trajectory_path=str(path), render_mode="ansi")
    obs, info = env.reset(seed=7, options={"task_id": "L1/1_ReLU"})
    assert info["task_id"] == "bundled/L1/1_ReLU" and info["size"] == "cpu" and info["backend"] == "cpp"
    assert "Reference module:" in obs["prompt"] and "load_cpp" in obs["prompt"]
    assert "Turns left: 4 of 4" in obs["prompt"]
    assert "KERNELGYM" not in obs["prompt"] and "Hardware:" in obs["prompt"]
    assert obs["turn"] == 0 and obs["feedback"] == "" and obs["best_speedup"][0] == 0

    # 1: no code -> a failed turn, nothing evaluated
    obs, reward, terminated, truncated, info = env.step("Let me think about vectorization first.")
    assert (reward, terminated, truncated, info["verdict"]) == (-1.0, False, False, "no_code")
    assert "No solution found" in obs["feedback"] and info["episode_summary"]["evaluations"] == 0
    assert info["result"]["verdict"] == "no_code" and info["result"]["reasons"][0].startswith("no_code")

    # 2: the bundled solution -> correct, judged for real
    obs, reward, terminated, truncated, info = env.step(fenced(relu_source))
    assert info["verdict"] == "ok" and info["result"]["correct"] is True
    assert EvalResult.from_dict(info["result"]).verdict.value == "ok"  # info's dict rebuilds the result
    assert reward >= 0.1 and not terminated and not truncated
    assert "Verdict: ok" in obs["feedback"] and "Turns left: 2 of 4" in obs["prompt"] and obs["turn"] == 2
    assert obs["last_speedup"][0] > 0 and obs["best_speedup"][0] == obs["last_speedup"][0]
    assert info["best"]["source"].strip() == relu_source.strip() and info["best"]["turn"] == 2
    summary = info["episode_summary"]
    assert summary["rewards"] == [-1.0, reward] and summary["verdicts"] == ["no_code", "ok"]
    assert "bundled/L1/1_ReLU" in env.render() and "Verdict: ok" in env.render()

    # 3: the agent is done -> terminated, reward 0, best kept
    obs, reward, terminated, truncated, info = env.step("DONE")
    assert (reward, terminated, truncated, info["verdict"]) == (0.0, True, False, "done")
    assert "result" not in info  # nothing was evaluated (None values are left out of info)
    assert info["best"]["turn"] == 2
    env.close()

    [episode] = read_episodes(path)
    assert episode["task_id"] == "bundled/L1/1_ReLU" and episode["seed"] == 7
    assert episode["env_id"] == "KernelGym-L1-v0"
    turns = episode["turns"]
    assert [t["turn"] for t in turns] == [1, 2, 3]
    assert [t["verdict"] for t in turns] == ["no_code", "ok", "done"]
    assert turns[1]["result"]["verdict"] == "ok" and turns[1]["solution"].strip() == relu_source.strip()
    assert turns[0]["prompt"].startswith("Task: bundled/L1/1_ReLU")
    assert turns[1]["action"].startswith("Here is")
    assert episode["terminated"] and not episode["truncated"]
    assert episode["total_reward"] == pytest.approx(sum(t["reward"] for t in turns))


def test_cheats_and_broken_code_are_failed_turns(pool):
    env = make(pool)
    env.reset(options={"task_id": "L1/1_ReLU"})
    cheat = next(c for c in cheats("cpp") if c.cheat == "pytorch_passthrough")
    _, reward, terminated, _, info = env.step(fenced(cheat.source))
    assert info["verdict"] == "hack" and reward == -1.0 and not terminated and "best" not in info
    broken = ("from kernelgym.kernels import load_cpp\nlib = load_cpp('extern \"C\" void f( {')\n"
              "class ModelNew: pass\n")
    obs, reward, _, _, info = env.step(fenced(broken))
    assert info["verdict"] == "compile_error" and reward == -1.0
    assert obs["feedback"].startswith("Verdict: compile_error")
    obs, reward, _, _, info = env.step("```python\ndef (:\n```")  # a syntax error is judged, not ignored
    assert info["verdict"] == "compile_error" and "syntax" in obs["feedback"].lower()
    assert obs["last_speedup"][0] == 0 and obs["best_speedup"][0] == 0


def test_target_speedup_terminates(pool, relu_source, slow_relu_task):
    # One pass against the reference's four: 2-2.4x measured on a 2-core VM with fresh (cold) input pages
    # for every batch, so the target sits well below that.
    env = KernelEnv(tasks=[slow_relu_task], size="cpu", backend="cpp", pool=pool, target_speedup=1.3,
                    eval_options={"timing_trials": 30, "max_contention": 1.0})  # load: test_contention's
    obs, info = env.reset(seed=0)
    assert "1.3x" in obs["prompt"]
    obs, reward, terminated, truncated, info = env.step(fenced(relu_source))
    assert info["verdict"] == "ok" and info["result"]["timing"]["verified"] is True
    assert terminated and not truncated and "Target speedup" in obs["feedback"]
    assert reward > 0.1 + 0.37  # 0.1 + log2(a verified speedup of at least 1.3x)
    assert info["best"]["verified"] and info["best"]["verified_speedup"] >= 1.3
    with pytest.raises(gym.error.ResetNeeded):
        env.step("DONE")


def test_reward_by_name_and_callable(pool, relu_source):
    seen = []

    def my_reward(result, state):
        seen.append((result.verdict.value, state.turn, state.previous_verdicts))
        return 5.0 if result.correct else -3.0

    env = make(pool, reward=my_reward)
    env.reset(options={"task_id": "L1/1_ReLU"})
    assert env.step("nothing")[1] == -3.0
    assert env.step(fenced(relu_source))[1] == 5.0
    assert seen == [("no_code", 1, ()), ("ok", 2, ("no_code",))]

    env = make(pool, reward="fast_p", reward_kwargs={"p": 0.0})
    env.reset(options={"task_id": "L1/1_ReLU"})
    assert env.step("nothing")[1] == 0.0
    assert env.step(fenced(relu_source))[1] == 1.0


def test_seeded_resets_are_reproducible(kernelbench_root):
    env = gym.make("KernelBench-L1-v0", kernelbench_root=str(kernelbench_root), size="cpu", backend="cpp")
    picks = {}
    for seed in range(12):
        first, _ = env.reset(seed=seed)
        follow, _ = env.reset()
        again, _ = env.reset(seed=seed)
        assert data_equivalence(first, again, exact=True)
        assert data_equivalence(follow, env.reset()[0], exact=True)  # reset() after the same seed: same draw
        picks[seed] = first["prompt"].split("\n", 1)[0]
    assert len(set(picks.values())) > 1  # different seeds reach different tasks

    other = gym.make("KernelBench-L1-v0", kernelbench_root=str(kernelbench_root), size="cpu", backend="cpp")
    assert all(other.reset(seed=s)[0]["prompt"].split("\n", 1)[0] == p for s, p in picks.items())


def test_failed_steps_are_deterministic(kernelbench_root):
    env = gym.make("KernelBench-L1-v0", kernelbench_root=str(kernelbench_root))
    outcomes = []
    for _ in range(2):
        env.reset(seed=3)
        obs, reward, terminated, truncated, info = env.step("no code at all")
        info.pop("episode_id")  # the one key that differs on purpose between episodes
        outcomes.append((obs, reward, terminated, truncated, info))
    assert data_equivalence(outcomes[0], outcomes[1], exact=True)


def test_sequential_sampling_visits_every_task(kernelbench_root):
    env = gym.make("KernelBench-L1-v0", kernelbench_root=str(kernelbench_root), sampling="sequential")
    ids = [env.reset()[1]["task_id"] for _ in range(4)]
    assert len(set(ids)) == 4 and env.reset()[1]["task_id"] == ids[0]
    assert env.reset(seed=2)[1]["task_id"] == ids[2]


def test_task_selection(kernelbench_root):
    root = str(kernelbench_root)
    env = gym.make("KernelBench-L1-v0", kernelbench_root=root, task_ids=["L1/2_Relu_Variant2"])
    assert [t.id for t in env.unwrapped.tasks] == ["kernelbench/L1/2_Relu_Variant2"]
    env = gym.make("KernelBench-L1-v0", kernelbench_root=root, task_filter={"name": "variant3"})
    assert [t.name for t in env.unwrapped.tasks] == ["Relu_Variant3"]
    env = gym.make("KernelBench-L1-v0", kernelbench_root=root, task_filter=lambda t: t.problem_id % 2 == 0)
    assert [t.problem_id for t in env.unwrapped.tasks] == [2, 4]
    picked = env.reset(options={"task_id": "L1/4_Relu_Variant4"})[1]["task_id"]
    assert picked == "kernelbench/L1/4_Relu_Variant4"
    with pytest.raises(TaskNotFoundError):
        env.reset(options={"task_id": "L1/1_Relu_Variant1"})  # filtered out
    with pytest.raises(ConfigError, match="no task matches"):
        gym.make("KernelBench-L1-v0", kernelbench_root=root, task_ids=["nope"])
    env = gym.make("KernelBench-L1-v0", kernelbench_root=root, seed=5)
    assert env.reset()[1]["seed"] == 5  # the configured seed drives the first unseeded reset


def test_bad_options_fail_at_construction(kernelbench_root):
    root = str(kernelbench_root)
    with pytest.raises(ConfigError, match="unknown environment option"):
        gym.make("KernelBench-L1-v0", kernelbench_root=root, max_turn=3)
    with pytest.raises(ConfigError, match="unknown evaluation option"):
        gym.make("KernelBench-L1-v0", kernelbench_root=root, eval_options={"timing_trails": 3})
    with pytest.raises(ConfigError):
        gym.make("KernelBench-L1-v0", kernelbench_root=root, size="huge")
    with pytest.raises(ConfigError):
        gym.make("KernelBench-L1-v0", kernelbench_root=root, reward="nope")
    with pytest.raises(Exception, match="unknown backend"):
        gym.make("KernelBench-L1-v0", kernelbench_root=root, backend="fortran")
    with pytest.raises(ConfigError):
        gym.make("KernelBench-L1-v0", kernelbench_root=root, reset_options=1)


def test_defaults_follow_the_hardware(kernelbench_root, monkeypatch):
    from kernelgym.envs import kernel_env

    env = gym.make("KernelBench-L1-v0", kernelbench_root=str(kernelbench_root))
    assert (env.unwrapped.backend, env.unwrapped.size) == ("cpp", "cpu")  # this machine has no GPU
    monkeypatch.setattr(kernel_env, "cuda_available", lambda: True)
    gpu = gym.make("KernelBench-L1-v0", kernelbench_root=str(kernelbench_root))
    assert (gpu.unwrapped.backend, gpu.unwrapped.size, gpu.unwrapped.device) == ("triton", "gpu", "cuda")
    cpp_on_gpu_host = gym.make("KernelBench-L1-v0", kernelbench_root=str(kernelbench_root), backend="cpp")
    assert cpp_on_gpu_host.unwrapped.size == "cpu"  # cpp candidates run on the CPU: the cpu size


def test_observations_stay_in_their_space_with_odd_text(kernelbench_root):
    env = gym.make("KernelBench-L1-v0", kernelbench_root=str(kernelbench_root), max_feedback_chars=200)
    env.reset(seed=0)
    obs, *_ = env.step("\u4e2d\u6587 \u2014 \x00\x07 no code " * 500)
    assert obs in env.observation_space
    assert isinstance(obs["turn"], int) and obs["last_speedup"].dtype == np.float32


@pytest.mark.parametrize("action", [123, None, ["print(1)"], {"code": "x"}])
def test_an_action_that_is_not_text_is_an_error_that_says_so(kernelbench_root, action):
    from kernelgym.errors import ActionError

    env = gym.make("KernelBench-L1-v0", kernelbench_root=str(kernelbench_root))
    env.reset(seed=0)
    with pytest.raises(ActionError, match="reply as a str"):
        env.step(action)
    _, _, _, _, info = env.step(np.array("no code here"))  # a numpy string is still text; no turn was lost
    assert info["turn"] == 1 and info["verdict"] == "no_code"


def test_one_verdict_vocabulary_for_a_reply_without_code(kernelbench_root, tmp_path):
    path = tmp_path / "t.jsonl"
    env = gym.make("KernelBench-L1-v0", kernelbench_root=str(kernelbench_root), trajectory_path=str(path))
    env.reset(seed=0)
    _, reward, _, _, info = env.step("I would fuse the loops.")
    assert info["verdict"] == info["result"]["verdict"] == "no_code" and reward == -1.0
    assert render_feedback(EvalResult.from_dict(info["result"])).startswith("Verdict: no_code")
    env.close()
    [episode] = read_episodes(path)
    assert episode["turns"][0]["verdict"] == episode["turns"][0]["result"]["verdict"] == "no_code"


def test_a_solution_for_another_backend_is_a_contract_error(pool, kernelbench_root, relu_source):
    env = gym.make("KernelBench-L1-v0", kernelbench_root=str(kernelbench_root), backend="cuda", pool=pool)
    env.reset(seed=0)
    _, reward, _, _, info = env.step(fenced(relu_source))  # C++ (load_cpp) sent to the cuda backend
    assert info["verdict"] == "compile_error" and reward == -1.0
    reason = info["result"]["reasons"][0]
    assert reason.startswith("wrong_backend:") and "load_cpp (the cpp backend)" in reason and "cuda" in reason
    triton = ("import triton\n@triton.jit\ndef k(x):\n    pass\nclass ModelNew:\n"
              "    def forward(self, x):\n        k(x)\n")
    env = gym.make("KernelBench-L1-v0", kernelbench_root=str(kernelbench_root), backend="cpp", pool=pool)
    env.reset(seed=0)
    _, _, _, _, info = env.step(fenced(triton))
    reason = info["result"]["reasons"][0]
    assert reason.startswith("wrong_backend:") and "the triton backend" in reason
