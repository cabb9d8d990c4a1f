"""Comparison of a candidate's outputs with the expected ones, in kernelgym's trusted process."""

from __future__ import annotations

import torch

from kernelgym.evaluation.result import TrialResult

FLOAT32_TOLERANCE = 1e-4  # as KernelBench: tight enough that a bf16/fp16/TF32 downcast fails
HALF_TOLERANCE = 1e-2
# atol = rtol per dtype (docs/options.md): a few units in the last place of each half type (fp16 keeps 11
# significant bits, bf16 8), so a kernel that accumulates in float32 and rounds once passes.
TOLERANCES = {"float32": FLOAT32_TOLERANCE, "float16": HALF_TOLERANCE, "bfloat16": 2e-2}
# Half dtypes: a candidate's mean error against a float32 run may be this many times the reference's own.
PRECISION_ERROR_RATIO = 4.0


def tolerance(dtype: str, atol: float | None = None, rtol: float | None = None) -> tuple[float, float]:
    default = TOLERANCES.get(dtype, FLOAT32_TOLERANCE)
    return (atol if atol is not None else default, rtol if rtol is not None else default)


def precision_lost(trial: TrialResult, golden: list[torch.Tensor], expected: list[torch.Tensor],
                   actual: list, dtype: torch.dtype, labels: list[str] | None = None) -> TrialResult:
    """`trial` unless an output's mean error against the float32 run (`golden`) is more than
    PRECISION_ERROR_RATIO times the reference's (or than one unit in the last place of `dtype`, where the
    reference is exact): the work was done in a narrower type than the task's."""
    eps = torch.finfo(dtype).eps
    for k, (gold, want, got) in enumerate(zip(golden, expected, actual)):
        if not isinstance(got, torch.Tensor) or not gold.is_floating_point() or not gold.numel():
            continue
        gold = gold.double()
        scale = float(gold.abs().mean())
        ref_err = float((want.double() - gold).abs().mean())
        got_err = float((got.double() - gold).abs().mean())
        allowed = max(PRECISION_ERROR_RATIO * ref_err, eps * scale) + 1e-12
        if got_err > allowed:
            label = labels[k] if labels and k < len(labels) else f"output {k}"
            name = str(dtype).removeprefix("torch.")
            return TrialResult(trial.index, trial.perturbed, False,
                               f"{label}: mean error {got_err:.3g} against a float32 run of the reference, "
                               f"{got_err / max(ref_err, 1e-30):.1f}x the {name} reference's {ref_err:.3g} "
                               f"(allowed {allowed:.3g}): computed in a narrower type than {name}",
                               lowered_precision=True)
    return trial


def compare_trial(
    index: int, perturbed: bool, expected: list[torch.Tensor], actual: list[torch.Tensor | str], atol: float,
    rtol: float, labels: list[str] | None = None
) -> TrialResult:
    """`actual` holds tensors, or strings that say why an output is not a usable tensor."""
    if len(actual) != len(expected):
        return TrialResult(index, perturbed, False,
                           f"forward returned {len(actual)} outputs, expected {len(expected)}")
    for k, (want, got) in enumerate(zip(expected, actual)):
        label = labels[k] if labels and k < len(labels) else f"output {k}" if len(expected) > 1 else "output"
        if isinstance(got, str):
            return TrialResult(index, perturbed, False, f"{label}: {got}")
        if tuple(got.shape) != tuple(want.shape):
            return TrialResult(index, perturbed, False,
                               f"{label}: shape {tuple(got.shape)}, expected {tuple(want.shape)}")
        if got.dtype != want.dtype:
            return TrialResult(index, perturbed, False, f"{label}: dtype {got.dtype}, expected {want.dtype}")
        if bool(_within(want, got, atol, rtol)):  # the common case, in one pass: no float64 copies
            continue
        result = _compare_values(index, perturbed, label, want, got, atol, rtol)
        if not result.passed:
            return result
    return TrialResult(index, perturbed, True)


def close_flag(want: torch.Tensor, got, atol: float, rtol: float) -> torch.Tensor | None:
    """`_within` for an output as it arrived, for many outputs read back at once; None where the output needs
    the full comparison (not a tensor, another shape or dtype)."""
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(want.shape) or got.dtype != want.dtype:
        return None
    return _within(want, got, atol, rtol)


def _within(want: torch.Tensor, got: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    """Whether every element is within tolerance, as a flag left on the device (no wait for it): the same rule
    as below (|got - want| <= atol + rtol * |want|, equal non-finite values agree), computed in the outputs'
    own dtype; where it is down, the exact float64 path decides and reports."""
    if not want.is_floating_point():
        return torch.eq(want, got).all()
    if want.element_size() < 4:  # half types: the bound in float32, so rounding cannot pass a miss
        want, got = want.float(), got.float()
    if want.numel() == 0:
        return torch.ones((), dtype=torch.bool, device=want.device)
    # |got - want| - rtol * |want| <= atol, its largest element against atol: NaN or an infinity anywhere
    # (inf - inf) makes a NaN, which the max keeps and the comparison fails, sending the output to the exact
    # path, which decides them. Five passes over the outputs where torch.isclose makes many more: on a GPU
    # this check of every timed call held the timing slot longer than the calls themselves.
    excess = torch.sub(got, want).abs_().sub_(want.abs(), alpha=rtol)
    return excess.max() <= atol


# An output on a discontinuity (ReLU's gradient where its input is 0 to within rounding, a comparison, a
# rounding function) takes either branch under any rounding difference, so an honest kernel that sums in
# another order than the reference lands on the other branch there. The reference shows which outputs those
# are: run again on its inputs perturbed far above a float32 sum's rounding (about 6e-8 of each term) and far
# below any tolerance, in antithetic pairs, so that each side of a discontinuity is reached in one of a pair.
ROUNDING_PERTURBATION = 1e-5
PERTURBATION_PAIRS = 2


def perturbed_at_rounding(inputs: list, pairs: int = PERTURBATION_PAIRS) -> list[list]:
    """Input sets near `inputs`: each float tensor times (1 + s * ROUNDING_PERTURBATION * noise), with noise
    drawn once per pair (fixed seeds) and s = +1 and -1."""
    sets = []
    for pair in range(pairs):
        noise: dict[int, torch.Tensor] = {}
        for sign in (1.0, -1.0):
            near = []
            for i, x in enumerate(inputs):
                if not (isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel()):
                    near.append(x)
                    continue
                if i not in noise:
                    gen = torch.Generator(device=x.device).manual_seed(0x5EED0 + 97 * pair + i)
                    noise[i] = torch.randn(tuple(x.shape), generator=gen, device=x.device)
                near.append((x.float() * (1 + sign * ROUNDING_PERTURBATION * noise[i])).to(x.dtype))
            sets.append(near)
    return sets


def first_uncovered(alternatives: list[list[torch.Tensor]], actual: list, atol: float,
                    rtol: float) -> int | None:
    """The first output with an element within tolerance of none of the reference's outputs in `alternatives`
    (its own, and its outputs at inputs perturbed at rounding level); None when every element is covered."""
    for k, got in enumerate(actual):
        if not isinstance(got, torch.Tensor):
            return k
        covered = torch.zeros(tuple(got.shape), dtype=torch.bool, device=got.device)
        for outputs in alternatives:
            want = outputs[k] if k < len(outputs) else None
            if not isinstance(want, torch.Tensor) or want.shape != got.shape or want.dtype != got.dtype:
                return k
            covered |= _close_elements(want, got, atol, rtol)
        if not bool(covered.all()):
            return k
    return None


def _close_elements(want: torch.Tensor, got: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    """`_within` element by element (equal non-finite values agree, as in the exact path)."""
    if not want.is_floating_point():
        return torch.eq(want, got)
    want, got = want.double(), got.double()
    within = (got - want).abs() <= atol + rtol * want.abs()
    return _agree_nonfinite(want, got) | (torch.isfinite(want) & within)


def _agree_nonfinite(want: torch.Tensor, got: torch.Tensor) -> torch.Tensor:
    """Where both hold the same non-finite value (inf and inf, NaN and NaN: the reference itself is not finite
    there): they agree, as torch.isclose(equal_nan=True) has it."""
    return ~torch.isfinite(want) & ((got == want) | (torch.isnan(got) & torch.isnan(want)))


# elements compared at a time: a shipped-size output (GBs) never needs a float64 copy of itself
CHUNK = 1 << 24


def _compare_values(index, perturbed, label, want, got, atol, rtol) -> TrialResult:
    """|got - want| <= atol + rtol * |want| element-wise (exact for integers), in chunks, on the device."""
    want_flat, got_flat = want.reshape(-1), got.reshape(-1)
    bad_total, max_abs, max_rel, first = 0, 0.0, 0.0, None
    nonfinite = 0
    for start in range(0, want_flat.numel(), CHUNK):
        w, g = want_flat[start:start + CHUNK], got_flat[start:start + CHUNK]
        if not want.is_floating_point():
            bad = w != g
        else:
            w64, g64 = w.double(), g.double()
            nonfinite += int((~torch.isfinite(g64) & torch.isfinite(w64)).sum())
            diff = (g64 - w64).abs()
            agree = _agree_nonfinite(w64, g64)  # where the difference would be NaN
            diff = torch.where(agree, torch.zeros_like(diff), diff)
            bad = ~_close_elements(w64, g64, atol, rtol)
            if diff.numel():
                max_abs = max(max_abs, float(diff.max()))
                max_rel = max(max_rel, float((diff / w64.abs().clamp_min(1e-12)).max()))
        count = int(bad.sum())
        if count and first is None:
            first = start + int(bad.nonzero()[0][0])
        bad_total += count
    if not bad_total:
        return TrialResult(index, perturbed, True, max_abs_diff=max_abs if want.is_floating_point() else None,
                           max_rel_diff=max_rel if want.is_floating_point() else None)
    position = list(_unravel(first, tuple(want.shape)))
    fraction = bad_total / max(want.numel(), 1)
    if not want.is_floating_point():
        return TrialResult(index, perturbed, False, f"{label}: {bad_total} of {want.numel()} values differ",
                           mismatch_fraction=fraction, first_mismatch=position)
    if nonfinite:
        return TrialResult(index, perturbed, False, f"{label}: {nonfinite} NaN/Inf values")
    return TrialResult(
        index, perturbed, False,
        f"{label}: {bad_total} of {want.numel()} values outside atol={atol:g}, rtol={rtol:g}",
        max_abs_diff=max_abs, max_rel_diff=max_rel, mismatch_fraction=fraction, first_mismatch=position,
        expected_value=float(want_flat[first]), actual_value=float(got_flat[first]),
    )


def _unravel(flat_index: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    position = []
    for size in reversed(shape):
        position.append(flat_index % size if size else 0)
        flat_index = flat_index // size if size else 0
    return tuple(reversed(position))
