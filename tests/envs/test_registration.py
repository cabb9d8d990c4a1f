"""Registration: every id passes gymnasium's env checker; registering is idempotent and light."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from kg_env_helpers import PROBLEM

from kernelgym.envs.registration import env_ids, register_envs
from kernelgym.errors import SuiteUnavailableError
from kernelgym.tasks import bundled


def make(env_id: str, kernelbench_root, **kwargs) -> gym.Env:
    kwargs.setdefault("size", "cpu")
    kwargs.setdefault("backend", "cpp")
    if env_id.startswith("KernelBench"):
        return gym.make(env_id, kernelbench_root=str(kernelbench_root), **kwargs)
    if "-L" not in env_id:  # a whole suite's id (KernelGym-Backward-v0, KernelGym-Curriculum-v0)
        return gym.make(env_id, **kwargs)
    level = int(env_id.split("-L")[1][0])
    if not len(bundled(level)):
        pytest.skip(f"the bundled suite has no level {level} tasks yet")
    return gym.make(env_id, **kwargs)


def test_ids_are_registered_once():
    before = len(gym.registry)
    assert register_envs() == env_ids()
    assert register_envs() == env_ids()
    assert len(gym.registry) == before
    assert set(env_ids()) <= set(gym.registry)
    whole_suites = ["KernelGym-Backward-v0", "KernelGym-Curriculum-v0"]
    assert sorted(env_ids()) == sorted([f"{f}-L{n}-v0" for f in ("KernelBench", "KernelGym")
                                        for n in (1, 2, 3)] + ["KernelBench-L4-v0"] + whole_suites)


@pytest.mark.parametrize("env_id", env_ids())
def test_check_env_passes(env_id, kernelbench_root):
    env = make(env_id, kernelbench_root)
    # check_env steps with sampled actions (random printable text): each must be a failed turn.
    check_env(env.unwrapped)
    obs, info = env.reset(seed=0)
    assert obs in env.observation_space
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    assert info["verdict"] == "no_code" and reward == -1.0 and not terminated and not truncated
    assert obs in env.observation_space
    env.close()
    env.close()  # closing twice is allowed


def test_max_turns_is_the_time_limit(kernelbench_root):
    env = make("KernelBench-L1-v0", kernelbench_root, max_turns=2)
    assert env.spec.max_episode_steps == 2
    env.reset(seed=1)
    assert env.step("no code")[3] is False
    _, _, terminated, truncated, info = env.step("still no code")
    assert truncated is True and terminated is False and info["turns_left"] == 0
    assert env.observation_space["turn"].n == 3


def test_kernelbench_without_problems_fails_at_make(monkeypatch, tmp_path):
    monkeypatch.delenv("KERNELBENCH_ROOT", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # no cached dataset either
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_DATASETS_CACHE", raising=False)
    with pytest.raises(SuiteUnavailableError, match="KERNELBENCH_ROOT"):
        gym.make("KernelBench-L1-v0")


def test_kernelbench_root_from_environment(monkeypatch, kernelbench_root):
    monkeypatch.setenv("KERNELBENCH_ROOT", str(kernelbench_root))
    env = gym.make("KernelBench-L2-v0", size="cpu", backend="cpp")
    assert {t.level for t in env.unwrapped.tasks} == {2} and len(env.unwrapped.tasks) == 2


def test_import_kernelgym_stays_light():
    code = (
        "import sys, kernelgym, gymnasium as gym\n"
        "assert 'KernelGym-L1-v0' in gym.registry and 'KernelBench-L3-v0' in gym.registry\n"
        "heavy = [m for m in ('torch', 'trl', 'transformers', 'datasets') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_module_prefixed_id_imports_kernelgym():
    # gymnasium's "module:id" form imports the module first: works without `import kernelgym`.
    code = (
        "import gymnasium as gym\n"
        "env = gym.make('kernelgym:KernelGym-L1-v0', size='cpu', backend='cpp')\n"
        "obs, info = env.reset(seed=0)\n"
        "assert info['task_id'].startswith('bundled/L1/')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_kernelbench_falls_back_to_a_cached_hf_dataset(monkeypatch):
    from kernelgym.envs import task_selection
    from kernelgym.tasks import from_hf_dataset

    monkeypatch.delenv("KERNELBENCH_ROOT", raising=False)
    row = {"code": PROBLEM.format(extra="", batch=8), "level": 1, "name": "1_Relu_Hub.py", "problem_id": 1}
    monkeypatch.setattr(task_selection, "_hf_dataset_cached", lambda: True)
    monkeypatch.setattr(task_selection, "from_hf_dataset",
                        lambda level=None: from_hf_dataset({"level_1": [row]}, level))
    env = gym.make("KernelBench-L1-v0", size="cpu", backend="cpp")
    assert [t.id for t in env.unwrapped.tasks] == ["kernelbench/L1/1_Relu_Hub"]


def test_the_backward_id_offers_the_backward_suite_and_its_prompt_says_so():
    env = gym.make("KernelGym-Backward-v0", backend="cpp", size="cpu", shapes="heldout", dtype="fp32")
    assert {t.level for t in env.unwrapped.tasks} == {1, 2}
    assert all(t.id.startswith("backward/") for t in env.unwrapped.tasks)
    obs, _ = env.reset(seed=0)
    assert "gradients of every float input" in obs["prompt"]
    assert "held-out shapes" in obs["prompt"] and "batch_size=" not in obs["prompt"].split("held-out")[1]
    env.close()


def test_the_prompt_names_a_half_precision_run():
    env = gym.make("KernelGym-L1-v0", backend="cpp", size="cpu", dtype="bf16")
    obs, _ = env.reset(options={"task_id": "L1/1_ReLU"})
    assert "This run is in bfloat16" in obs["prompt"] and "held-out" not in obs["prompt"]
    env.close()
