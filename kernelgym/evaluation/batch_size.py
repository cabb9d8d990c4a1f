"""How many calls a batch holds: enough to fill a timed batch's target time, no more than the memory a batch
may use (the device's free memory, as the reference measured it; the CPU's is a flat 1 GiB)."""

from __future__ import annotations

from kernelgym.evaluation import rules
from kernelgym.evaluation.outcome import end
from kernelgym.evaluation.state import Evaluation

# An input set's copies on a GPU: the reference's own, its pristine copy, the buffers the candidate maps, and
# one of slack for the caching allocator's rounding (the CPU's budget is a flat 1 GiB).
INPUT_COPIES = 4


def calls_per_batch(ev: Evaluation, round_trip_ms: float = 0.0) -> int:
    """Calls that fill a timed batch's target time, by the reference's time in the first batch (the
    candidate cannot inflate it), less the batch's fixed round trip where it is known."""
    first = ev.first_batch
    per_call = max((first.reference_ms - round_trip_ms) / first.calls, 1e-4)
    target_ms = ev.options.timing_batch_ms or (25.0 if ev.device == "cuda" else 10.0)
    calls = int(min(ev.options.max_calls_per_batch, max(1, round(target_ms / per_call))))
    return calls_that_fit(ev, calls)


def check_fits(ev: Evaluation, per_batch: int) -> None:
    """GPU: one batch of `per_batch` calls fits in the device's free memory, or the task is too large."""
    ready = ev.ready
    if ev.device != "cuda":
        return
    need = per_batch * bytes_per_call(ev)
    free = ready.device_memory_bytes
    if free and need > free:
        raise end(rules.TOO_LARGE, f"one call needs about {need / 2**30:.1f} GiB with the judge's "
                                   f"copies; the device has {free / 2**30:.1f} GiB")


def calls_that_fit(ev: Evaluation, calls: int, share: float = 0.4) -> int:
    """Calls per batch that fit in the memory a batch may use."""
    return max(1, min(calls, memory_budget(ev, share) // max(bytes_per_call(ev), 1)))


def bytes_per_call(ev: Evaluation) -> int:
    """What one call holds: its input set INPUT_COPIES times and two sets of outputs (the reference's and
    the candidate's)."""
    return INPUT_COPIES * ev.ready.input_bytes + 2 * ev.ready.output_bytes


def memory_budget(ev: Evaluation, share: float = 0.4) -> int:
    """The memory a batch may use: a share of the device's free memory (the CPU's is a flat 1 GiB)."""
    return (1 << 30) if ev.device == "cpu" else int(share * (ev.ready.device_memory_bytes or 8 << 30))
