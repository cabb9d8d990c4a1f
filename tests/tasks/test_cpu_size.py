"""KernelBench problems ship only their GPU size: size='cpu' derives a small one, measured and cached."""

from __future__ import annotations

import time

import gymnasium as gym
import pytest

import kernelgym  # noqa: F401  (registers the ids)
from kernelgym.tasks import task_from_source
from kernelgym.tasks.cpu_size import SizeUnavailableError, cpu_size, size_constants, with_cpu_size

# KernelBench's L2 86_Matmul_Divide_GELU at its real size: a float32 weight of 256 MiB, ~1 TFLOP a forward.
MATMUL = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size, output_size, divisor):
        super().__init__()
        self.linear = nn.Linear(input_size, output_size)
        self.divisor = divisor

    def forward(self, x):
        return torch.nn.functional.gelu(self.linear(x) / self.divisor)


batch_size = 1024
input_size = 8192
output_size = 8192
divisor = 10.0
kernel_size = 3


def get_inputs():
    return [torch.rand(batch_size, input_size)]


def get_init_inputs():
    return [input_size, output_size, divisor]
"""

# No size constant to scale: the size is written into get_inputs.
UNSCALABLE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand(1 << 16, 1 << 16)]


def get_init_inputs():
    return []
"""


@pytest.fixture
def kernelbench_root(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELGYM_CACHE", str(tmp_path / "cache"))
    level2 = tmp_path / "KernelBench" / "level2"
    level2.mkdir(parents=True)
    (tmp_path / "KernelBench" / "level1").mkdir()  # a checkout is recognised by its level1 folder
    (level2 / "86_Matmul_Divide_GELU.py").write_text(MATMUL)
    (level2 / "87_Relu_Written_In.py").write_text(UNSCALABLE)
    return tmp_path


def test_size_constants_are_sizes_not_structure():
    assert size_constants(MATMUL) == {"batch_size": 1024, "input_size": 8192, "output_size": 8192}


@pytest.mark.slow
def test_size_cpu_runs_kernelbench_at_a_derived_cpu_size(kernelbench_root):
    env = gym.make("KernelBench-L2-v0", kernelbench_root=str(kernelbench_root), size="cpu")
    start = time.monotonic()
    obs, info = env.reset(options={"task_id": "kernelbench/L2/86_Matmul_Divide_GELU"})
    derived_s = time.monotonic() - start
    assert info["size"] == "cpu" and "8192" not in obs["prompt"]
    task = env.unwrapped._episode.task
    found = cpu_size(task)  # from the cache now
    assert found.error == "" and not found.screen_flags
    assert 1.0 <= found.reference_ms <= 200.0  # tens of ms, not the 46 s of the real size
    assert set(found.constants) == {"batch_size", "input_size", "output_size"}
    assert all(v < 8192 for v in found.constants.values()) and found.constants["input_size"] >= 8
    assert (
        f"input_size = {found.constants['input_size']}" in obs["prompt"]
        and "kernel_size = 3" in obs["prompt"]
    )
    assert list((kernelbench_root / "cache" / "cpu_sizes").glob("*.json"))
    start = time.monotonic()
    env.reset(options={"task_id": "kernelbench/L2/86_Matmul_Divide_GELU"})
    assert time.monotonic() - start < max(0.5, derived_s / 2)  # measured once per task, then cached


def test_a_task_that_cannot_be_scaled_says_so(kernelbench_root):
    env = gym.make("KernelBench-L2-v0", kernelbench_root=str(kernelbench_root), size="cpu")
    with pytest.raises(
        SizeUnavailableError, match="cannot be scaled to a cpu size: it has no module-level size"
    ):
        env.reset(options={"task_id": "kernelbench/L2/87_Relu_Written_In"})
    gpu = gym.make("KernelBench-L2-v0", kernelbench_root=str(kernelbench_root), size="gpu")
    assert gpu.reset(options={"task_id": "kernelbench/L2/87_Relu_Written_In"})[1]["size"] == "gpu"


def test_a_task_with_its_own_cpu_size_keeps_it():
    from kernelgym.tasks import bundled

    task = bundled().get("L1/1_ReLU")
    assert with_cpu_size(task) is task
    plain = task_from_source(UNSCALABLE, suite="user", level=1, file_name="1_X.py")
    with pytest.raises(SizeUnavailableError):
        with_cpu_size(plain)


@pytest.mark.slow
def test_tasks_check_screens_kernelbench_at_the_derived_size(kernelbench_root):
    import json

    from typer.testing import CliRunner

    from kernelgym.cli import app

    result = CliRunner().invoke(
        app,
        [
            "tasks",
            "check",
            "--suite",
            "kernelbench",
            "--kernelbench-root",
            str(kernelbench_root),
            "--level",
            "2",
            "--json",
        ],
    )
    rows = {r["id"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert rows["kernelbench/L2/86_Matmul_Divide_GELU"]["ok"]
    assert "cannot be scaled" in rows["kernelbench/L2/87_Relu_Written_In"]["reason"] and result.exit_code == 1


def test_sizes_written_as_arithmetic_are_found():
    source = MATMUL.replace("input_size = 8192", "input_size = 2048 * 4").replace(
        "batch_size = 1024", "M = 256 * 4"
    )
    source = source.replace("batch_size, input_size", "M, input_size") + "k = 96\ntop_k = 50\n"
    assert size_constants(source) == {"M": 1024, "input_size": 8192, "output_size": 8192, "k": 96}


def test_chained_and_tuple_assignments_are_scaled_together():
    from kernelgym.tasks.task import substitute_constants

    source = MATMUL.replace("input_size = 8192", "input_size = output_size = 8192\nheight, width = 512, 3")
    source = source.replace("output_size = 8192\ndivisor", "divisor")
    assert size_constants(source) == {
        "batch_size": 1024,
        "input_size": 8192,
        "output_size": 8192,
        "height": 512,
    }
    rewritten = substitute_constants(source, {"input_size": 64, "output_size": 64, "height": 32})
    assert "input_size = output_size = 64" in rewritten and "height, width = (32, 3)" in rewritten
    with pytest.raises(SizeUnavailableError.__mro__[1]):  # TaskFormatError: the two names cannot differ
        substitute_constants(source, {"input_size": 64, "output_size": 32})
