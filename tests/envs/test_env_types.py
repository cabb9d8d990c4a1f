"""The env's typed outputs: the keys the TypedDicts declare are the keys handed out; episode ids are
unique."""

from __future__ import annotations

import gymnasium as gym
import pytest

from kernelgym.envs.types import BestSolution, Observation, ResetInfo, StepInfo
from kernelgym.errors import TaskNotFoundError


@pytest.fixture
def env(kernelbench_root):
    return gym.make("KernelBench-L1-v0", kernelbench_root=str(kernelbench_root), size="cpu", backend="cpp")


def test_outputs_carry_the_declared_keys(env):
    obs, info = env.reset(seed=1)
    assert set(obs) == set(Observation.__annotations__) == set(env.observation_space.spaces)
    assert set(info) == set(ResetInfo.__annotations__)  # seeded: no key left out
    obs, reward, _terminated, _truncated, info = env.step("no code here")
    assert set(obs) == set(Observation.__annotations__) and env.observation_space.contains(obs)
    assert set(info) <= set(StepInfo.__annotations__)
    assert {"episode_id", "task_id", "turn", "turns_left", "verdict", "result",
            "episode_summary"} <= set(info)
    assert "best" not in info and "solution" not in info  # no correct reply, no code: left out, not None
    assert info["episode_summary"]["return"] == reward and info["episode_summary"]["verdicts"] == ["no_code"]


def test_episode_ids_are_distinct_and_consistent(env):
    seen = []
    for seed in (0, 0, 1):
        _, info = env.reset(seed=seed)
        assert env.unwrapped.episode_id == info["episode_id"]
        assert env.step("still thinking")[4]["episode_id"] == info["episode_id"]
        seen.append(info["episode_id"])
    assert len(set(seen)) == 3  # the same seed twice is still two episodes


def test_unknown_task_id_suggests_the_close_ones(env):
    with pytest.raises(TaskNotFoundError, match=r"Did you mean 'L1/1_Relu_Variant1'"):
        env.reset(options={"task_id": "L1/1_ReLU_Variant1"})


def test_best_solution_ranks_verified_first():
    measured_only = BestSolution(source="a", speedup=3.0, verified_speedup=None, turn=1)
    verified = BestSolution(source="b", speedup=1.5, verified_speedup=1.5, turn=2)
    assert verified.rank > measured_only.rank and verified.verified and not measured_only.verified
    assert measured_only.to_info() == {"source": "a", "speedup": 3.0, "verified": False, "turn": 1}
    assert verified.to_info()["verified_speedup"] == 1.5


def test_gymnasium_s_episode_statistics_wrapper_works_unchanged(env):
    """RecordEpisodeStatistics writes info["episode"] at an episode's end and asserts the key is free: the
    env's own summary lives under "episode_summary" (a new user's wrapped env crashed at every end)."""
    wrapped = gym.wrappers.RecordEpisodeStatistics(env)
    wrapped.reset(seed=3)
    _obs, _reward, terminated, _truncated, info = wrapped.step("DONE")
    assert terminated and info["episode"]["l"] == 1 and "episode_summary" in info
