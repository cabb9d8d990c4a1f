"""Comparison of a candidate's outputs with the expected ones, in kernelgym's trusted process."""

from __future__ import annotations

import torch

from kernelgym.evaluation.result import TrialResult

FLOAT32_TOLERANCE = 1e-4  # as KernelBench: tight enough that a bf16/fp16/TF32 downcast fails
HALF_TOLERANCE = 1e-2


def tolerance(dtype: str, atol: float | None = None, rtol: float | None = None) -> tuple[float, float]:
    default = HALF_TOLERANCE if dtype in ("float16", "bfloat16") else FLOAT32_TOLERANCE
    return (atol if atol is not None else default, rtol if rtol is not None else default)


def compare_trial(
    index: int, perturbed: bool, expected: list[torch.Tensor], actual: list[torch.Tensor | str], atol: float, rtol: float
) -> TrialResult:
    """`actual` holds tensors, or strings that say why an output is not a usable tensor."""
    if len(actual) != len(expected):
        return TrialResult(index, perturbed, False, f"forward returned {len(actual)} outputs, expected {len(expected)}")
    for k, (want, got) in enumerate(zip(expected, actual)):
        label = f"output {k}" if len(expected) > 1 else "output"
        if isinstance(got, str):
            return TrialResult(index, perturbed, False, f"{label}: {got}")
        if tuple(got.shape) != tuple(want.shape):
            return TrialResult(index, perturbed, False, f"{label}: shape {tuple(got.shape)}, expected {tuple(want.shape)}")
        if got.dtype != want.dtype:
            return TrialResult(index, perturbed, False, f"{label}: dtype {got.dtype}, expected {want.dtype}")
        result = _compare_values(index, perturbed, label, want, got, atol, rtol)
        if not result.passed:
            return result
    return TrialResult(index, perturbed, True)


def _compare_values(index, perturbed, label, want, got, atol, rtol) -> TrialResult:
    if not want.is_floating_point():
        bad = want != got
        if not bool(bad.any()):
            return TrialResult(index, perturbed, True)
        where = [int(i) for i in bad.nonzero()[0]]
        return TrialResult(index, perturbed, False, f"{label}: {int(bad.sum())} of {want.numel()} values differ",
                           mismatch_fraction=float(bad.float().mean()), first_mismatch=where)
    want64, got64 = want.double(), got.double()
    if not bool(torch.isfinite(got64).all()) and bool(torch.isfinite(want64).all()):
        count = int((~torch.isfinite(got64)).sum())
        return TrialResult(index, perturbed, False, f"{label}: {count} NaN/Inf values")
    diff = (got64 - want64).abs()
    # Where both are the same non-finite value (the reference itself is inf), the difference is NaN.
    diff = torch.where(torch.isfinite(want64) | (got64 != want64), diff, torch.zeros_like(diff))
    bad = ~(diff <= atol + rtol * want64.abs())
    max_abs = float(diff.max()) if diff.numel() else 0.0
    max_rel = float((diff / want64.abs().clamp_min(1e-12)).max()) if diff.numel() else 0.0
    if not bool(bad.any()):
        return TrialResult(index, perturbed, True, max_abs_diff=max_abs, max_rel_diff=max_rel)
    where = bad.nonzero()[0]
    position = tuple(int(i) for i in where)
    return TrialResult(
        index, perturbed, False,
        f"{label}: {int(bad.sum())} of {want.numel()} values outside atol={atol:g}, rtol={rtol:g}",
        max_abs_diff=max_abs, max_rel_diff=max_rel, mismatch_fraction=float(bad.double().mean()),
        first_mismatch=list(position), expected_value=float(want64[position]), actual_value=float(got64[position]),
    )
