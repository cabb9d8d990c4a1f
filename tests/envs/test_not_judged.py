"""A turn the judge itself failed is never the agent's: reward 0, info["judged"] False, the turn returned."""

import gymnasium as gym
import pytest
from kg_env_helpers import fenced

from kernelgym.workers.pool import EvalPool


@pytest.fixture
def broken_judge():
    # A real pool whose disk is "full" (no folder has 2**40 MiB free): every evaluation is
    # infrastructure_error.
    with EvalPool(workers=1, gpu=False, infra_retries=0, min_free_disk_mb=1 << 40) as pool:
        yield pool


def test_an_unjudged_turn_is_given_back_and_earns_nothing(broken_judge, relu_solution):
    env = gym.make(
        "KernelGym-L1-v0", backend="cpp", size="cpu", max_turns=1, max_unjudged_turns=2, pool=broken_judge
    )
    obs, _ = env.reset(seed=0, options={"task_id": "L1/1_ReLU"})
    for attempt in range(2):
        obs, reward, terminated, truncated, info = env.step(fenced(relu_solution))
        assert info["verdict"] == "infrastructure_error" and info["judged"] is False
        assert reward == 0.0 and not terminated and not truncated  # max_turns is 1: the turn came back
        assert obs["turn"] == 0 and "does not count" in obs["feedback"]
    obs, reward, terminated, truncated, info = env.step(fenced(relu_solution))
    assert reward == 0.0 and truncated and not terminated and info["judged"] is False
    assert info["episode_summary"]["rewards"] == [0.0, 0.0, 0.0]
    with pytest.raises(gym.error.ResetNeeded):
        env.step(fenced(relu_solution))
    env.close()
