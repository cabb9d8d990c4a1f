"""The worker warms Triton's compiler before it forks evaluations, without touching the CUDA driver."""

import os
import sys

import torch

from kernelgym.workers import triton_warm

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "judge_speed"))
from triton_fork_warm import child_compile_s


def test_the_warm_up_compiles_a_kernel_and_leaves_the_driver_and_the_cache_setting_alone(monkeypatch):
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    assert triton_warm.warm_compiler(90)
    assert "TRITON_CACHE_DIR" not in os.environ  # each forked evaluation sets its own private cache
    assert not torch.cuda.is_initialized()  # a worker that initialized CUDA could fork no usable process
    assert child_compile_s(7) > 0  # a fork of the warmed process compiles a new kernel of its own


def test_the_capability_falls_back_to_sm90_without_nvidia_smi(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert triton_warm.gpu_capability() == 90
