"""The caller's mistakes at reset are one clear KernelGymError, and the env still works afterwards."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import kernelgym  # noqa: F401  (registers the ids)
from kernelgym.errors import ConfigError, KernelGymError, TaskNotFoundError


@pytest.fixture
def l2():
    env = gym.make("KernelGym-L2-v0", backend="cpp", size="cpu")
    yield env
    env.close()


@pytest.mark.parametrize("seed", [-1, 1.5, True, "3"])
def test_bad_reset_seed_is_a_kernelgym_error(l2, seed):
    with pytest.raises(ConfigError, match=r"reset\(seed=\.\.\.\) takes None or an integer >= 0"):
        l2.reset(seed=seed)


def test_good_seeds_still_work(l2):
    _, first = l2.reset(seed=0)
    _, numpy_int = l2.reset(seed=np.int64(0))
    assert first["task_id"] == numpy_int["task_id"] and numpy_int["seed"] == 0


def test_bad_config_seed():
    with pytest.raises(ConfigError, match="seed takes None or an integer >= 0"):
        gym.make("KernelGym-L1-v0", backend="cpp", size="cpu", seed=-2)


def test_a_failed_first_reset_leaves_the_env_usable(l2):
    with pytest.raises(KernelGymError):
        l2.reset(seed=-1)
    l2.reset(seed=0)
    _, _, _, _, info = l2.step("hello")  # gymnasium's passive checker used to fail here (TypeError)
    assert info["verdict"] == "no_code"


def test_task_of_another_level_names_the_right_env(l2):
    with pytest.raises(TaskNotFoundError) as caught:
        l2.reset(options={"task_id": "L1/1_ReLU"})
    message = str(caught.value)
    assert message == ("'L1/1_ReLU' is a level-1 task and KernelGym-L2-v0 offers L2 tasks; "
                       "make KernelGym-L1-v0 for it")
    assert "Did you mean" not in message  # no unrelated level-2 suggestion
    with pytest.raises(TaskNotFoundError, match="Did you mean 'L2/1_Gemm_BiasAdd_ReLU'"):
        l2.reset(options={"task_id": "L2/1_Gemm_BiasAd"})  # a typo within the level keeps its suggestion


def test_no_code_is_judged_but_not_evaluated(l2):
    l2.reset(seed=0)
    _, _, _, _, info = l2.step("no code here, sorry")
    assert info["verdict"] == "no_code"
    assert info["judged"] is True  # charged: the agent's failed turn, a sample a trainer keeps
    assert info["evaluated"] is False  # it never reached the judge
    assert info["episode_summary"]["evaluations"] == 0 and info["turns_left"] == 3


@pytest.mark.parametrize("value", ["L2/1_Gemm_BiasAdd_ReLU", 3])
def test_reset_option_task_that_is_not_a_task_is_refused(l2, value):
    # An id given under "task" instead of "task_id" used to be ignored: the env served a random task.
    with pytest.raises(ConfigError, match=r"takes a kernelgym Task.*options=\{'task_id'"):
        l2.reset(options={"task": value})
    _, info = l2.reset(options={"task_id": "L2/1_Gemm_BiasAdd_ReLU"})
    assert info["task_id"].endswith("L2/1_Gemm_BiasAdd_ReLU")
