"""A sampled task whose derived cpu size the degenerate-task screen flags is skipped (a fill would be paid on
it); one asked for by id is still served. KernelBench's L2/36 is such a task: its output is the bias."""

from __future__ import annotations

import gymnasium as gym
import pytest

import kernelgym

HEALTHY = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


batch_size = 4096
dim = 4096


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
"""

# The output never depends on x: what a constant fill matches.
CONSTANT = HEALTHY.replace("return torch.relu(x)", "return torch.zeros_like(x) + 2.0")


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELGYM_CACHE", str(tmp_path / "cache"))
    level1 = tmp_path / "KernelBench" / "level1"
    level1.mkdir(parents=True)
    (level1 / "1_Healthy_Relu.py").write_text(HEALTHY)
    (level1 / "2_Constant_Fill.py").write_text(CONSTANT)
    return tmp_path


def test_sampled_degenerate_tasks_are_skipped_and_named(checkout):
    env = gym.make("KernelBench-L1-v0", kernelbench_root=str(checkout), size="cpu", sampling="sequential")
    served = [env.reset(seed=0 if i == 0 else None)[1]["task_id"] for i in range(4)]
    assert served == ["kernelbench/L1/1_Healthy_Relu"] * 4
    assert env.unwrapped._degenerate == {"kernelbench/L1/2_Constant_Fill"}


def test_a_degenerate_task_asked_for_by_id_or_with_skipping_off_is_served(checkout):
    env = gym.make("KernelBench-L1-v0", kernelbench_root=str(checkout), size="cpu")
    with pytest.warns(UserWarning, match="degenerate-task screen flags"):
        info = env.reset(options={"task_id": "kernelbench/L1/2_Constant_Fill"})[1]
    assert info["task_id"] == "kernelbench/L1/2_Constant_Fill"
    off = gym.make("KernelBench-L1-v0", kernelbench_root=str(checkout), size="cpu", sampling="sequential",
                   skip_degenerate=False)
    served = {off.reset(seed=0 if i == 0 else None)[1]["task_id"] for i in range(2)}
    assert "kernelbench/L1/2_Constant_Fill" in served


def test_only_degenerate_tasks_is_a_clear_error(checkout):
    env = gym.make("KernelBench-L1-v0", kernelbench_root=str(checkout), size="cpu",
                   task_ids=["kernelbench/L1/2_Constant_Fill"])
    with pytest.raises(kernelgym.errors.ConfigError, match="skip_degenerate=False"):
        env.reset()
