"""render_feedback(result): an EvalResult as concise text an LLM can act on. The result is plain data and
knows nothing of its rendering."""

from __future__ import annotations

from kernelgym.evaluation.result import EvalResult
from kernelgym.evaluation.verdict import Verdict

_HEADLINES = {
    Verdict.OK: "Correct.",
    Verdict.NO_CODE: "The reply held no solution module.",
    Verdict.COMPILE_ERROR: "The solution did not build.",
    Verdict.RUNTIME_ERROR: "The solution raised an error.",
    Verdict.INCORRECT: "The output is wrong.",
    Verdict.HACK: "Rejected by the integrity checks: no credit.",
    Verdict.TIMEOUT: "The solution ran past its time limit.",
    Verdict.CRASH: "The solution crashed its process.",
    Verdict.INFRASTRUCTURE_ERROR: "The judge failed (not your solution): this attempt was not judged.",
}


def render_feedback(result: EvalResult, max_chars: int = 4000) -> str:
    lines = [f"Verdict: {result.verdict.value}. {_HEADLINES[result.verdict]}"]
    lines += [f"- {reason}" for reason in result.reasons]
    if result.build is not None and result.build.log:
        lines += ["Compiler output (trimmed):", result.build.log]
    if result.load is not None and result.load.error and result.verdict is not Verdict.OK:
        lines.append(f"Import error: {result.load.error[:600]}")
    corr = result.correctness
    if corr is not None and corr.trials:
        failure = corr.first_failure
        if failure is None:
            lines.append(f"Correctness: {len(corr.trials)}/{len(corr.trials)} trials within "
                         f"atol={corr.atol:g}, rtol={corr.rtol:g}.")
        elif failure.first_mismatch is not None:
            lines.append(
                f"First mismatch at index {tuple(failure.first_mismatch)}: expected "
                f"{failure.expected_value:.6g}, got {failure.actual_value:.6g}; max abs diff "
                f"{failure.max_abs_diff:.3g}; {100 * (failure.mismatch_fraction or 0):.1f}% of values off."
            )
    lines += _timing_lines(result.timing)
    prof = result.profile
    if prof is not None and prof.coverage is not None:
        ops = ", ".join(f"{name} {ms:.3g} ms" for name, ms in prof.top_ops[:3])
        lines.append(f"Profile: {prof.coverage:.0%} of your time in your own kernels"
                     + (f"; most time in: {ops}" if ops else "") + ".")  # own kernels and PyTorch's alike
    if prof is not None and prof.kernels:
        lines.append("Nsight Compute, your kernels by time:")
        lines += [f"- {_kernel_line(k)}"
                  for k in sorted(prof.kernels, key=lambda k: -(k.duration_us or 0))[:5]]
    elif prof is not None and prof.ncu_note and result.verdict is Verdict.OK:
        lines.append(prof.ncu_note + ".")
    if result.output_tail and result.verdict in (Verdict.RUNTIME_ERROR, Verdict.CRASH, Verdict.TIMEOUT):
        lines += ["Your program's output (tail):", result.output_tail[-800:]]
    text = "\n".join(lines)
    return text if len(text) <= max_chars else text[: max_chars - 20] + "\n... [truncated]"


def _timing_lines(timing) -> list[str]:
    if timing is None:
        return []
    if not (timing.available and timing.candidate and timing.reference):
        return [timing.reason.capitalize() + "."] if timing.reason else []
    headline = (f"Timing on {timing.device}: yours {timing.candidate.median_ms:.4g} ms, reference "
                f"{timing.reference.median_ms:.4g} ms (medians of {timing.candidate.trials} runs); speedup "
                f"{timing.speedup:.3g}x (95% CI {timing.speedup_ci_low:.3g}-{timing.speedup_ci_high:.3g}), "
                f"{'verified' if timing.verified else 'not verified'}.")
    lines = [headline]
    if timing.contended:
        lines.append(f"The machine was busy: other processes held the timing's cores for "
                     f"{timing.cpu_wait_share:.0%} of a side's timed runs, so this timing is marked "
                     "contended and its speedup is not verified (it says little about your code).")
    if timing.floor_ms is not None and timing.roofline_fraction is not None:
        lines.append(
            f"Roofline: {timing.bound}-bound ({timing.flops / 1e9:.3g} GFLOP, "
            f"{timing.min_bytes / 1e6:.3g} MB at least); floor {timing.floor_ms:.3g} ms on this "
            f"machine's measured peaks; yours is at {100 * timing.roofline_fraction:.1f}% of roofline"
            + (" (above 100%: the data stays in cache at this size)." if timing.roofline_fraction > 1
               else "."))
    timed_ms = timing.candidate.median_ms * (timing.batches or 0) * (timing.calls_per_batch or 0)
    if (timing.cpu_past_clock_ms or 0) > 0.05 * timed_ms:  # noise below that
        lines.append("Your threads kept working after forward returned: "
                     f"{timing.cpu_past_clock_ms:.3g} ms of CPU time past the clock were added to your "
                     "times.")
    if timing.speedup_vs_compile:
        lines.append(f"Against torch.compile of the reference ({timing.compile_ms:.4g} "
                     f"ms{', cached baseline' if timing.compile_baseline_cached else ''}): "
                     f"{timing.speedup_vs_compile:.3g}x.")
    return lines


def _kernel_line(k) -> str:
    def pct(value):
        return "?" if value is None else f"{value:.0f}%"

    spills = (k.local_load_instructions or 0) + (k.local_store_instructions or 0)
    name = k.kernel.removeprefix("void ").split("(")[0][:60]
    parts = [f"{name}: {k.duration_us:.4g} us" if k.duration_us is not None else name,
             f"memory {pct(k.memory_throughput_pct)} / compute {pct(k.compute_throughput_pct)} of peak",
             f"occupancy {pct(k.achieved_occupancy_pct)}"]
    if k.registers_per_thread is not None:
        parts.append(f"{k.registers_per_thread:.0f} registers/thread")
    if spills:
        parts.append(f"{spills:.0f} local-memory instructions (register spills?)")
    return ", ".join(parts)
