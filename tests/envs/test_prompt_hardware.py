"""The prompt names the CPU's widest vector extension: the judge builds C++ with -march=native, and kernels
written for 16-float vectors ran 20-40x slower where AVX-512 was missing (issue 47)."""

from __future__ import annotations

from kernelgym import kernels
from kernelgym.envs.prompt import hardware_summary


def test_the_cpu_prompt_says_which_vector_width_the_machine_has(monkeypatch):
    monkeypatch.setattr(kernels, "cpu_features", lambda: "avx avx2 avx512f fma")
    assert "AVX-512: 16 floats" in hardware_summary("cpu")
    monkeypatch.setattr(kernels, "cpu_features", lambda: "avx avx2 fma")
    assert "AVX2 without AVX-512: 8 floats" in hardware_summary("cpu")
    monkeypatch.setattr(kernels, "cpu_features", lambda: "")
    assert "AVX" not in hardware_summary("cpu")
