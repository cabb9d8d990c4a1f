"""Stage 6 on a GPU (or a CPU host without perf events), profile: one more batch under the profiler in the
candidate's process; the solution's own kernels must run and PyTorch's compute stay within its share
(evaluation/profile.py). On a GPU with launch_evidence, the kernel launches the worker saw from outside the
candidate in every batch decide instead, and the profile is a hint (evaluation/launch_evidence.py)."""

from __future__ import annotations

import time

from kernelgym.evaluation import launch_evidence
from kernelgym.evaluation.batch import later_outputs_checked, run_batch
from kernelgym.evaluation.batch_size import calls_per_batch
from kernelgym.evaluation.outcome import end
from kernelgym.evaluation.profile import judge_profile
from kernelgym.evaluation.result import ProfileResult
from kernelgym.evaluation.state import Evaluation


def profile(ev: Evaluation) -> None:
    ev.stage = "profile"
    started = time.monotonic()
    # Without a timing stage, as many calls as a timed batch would hold: one tiny call measures mostly
    # noise, which on a loaded machine read as untracked work in an honest backward (CI: 0.148 ms, hack).
    timed_calls = ev.result.timing.calls_per_batch if ev.result.timing else None
    calls = timed_calls or calls_per_batch(ev)
    seeds = ev.seeds(calls)
    with later_outputs_checked(ev, seeds):
        record = run_batch(ev, seeds, [False] * calls, profile=True)
    data = record.profile
    profile = ProfileResult(
        coverage=data.get("coverage"), own_kernel_calls=int(data.get("own_kernel_calls", 0)),
        top_ops=[(str(k), float(v)) for k, v in data.get("top_ops", [])],
        heavy_torch_ops=[str(k) for k in data.get("heavy_torch_ops", [])],
    )
    sampled = ev.result.profile  # samples too few to decide: still shown beside the profile's word
    if sampled is not None:
        profile.samples, profile.sampled_shares, profile.top_files = (
            sampled.samples, sampled.sampled_shares, sampled.top_files)
    ev.result.profile = profile
    ev.result.stage_s["profile"] = round(time.monotonic() - started, 3)
    hint = judge_profile(data, calls, ev.job.backend, ev.options)
    if ev.gpu_evidence is not None:  # the launches seen from outside decide; the profile only hints
        launch_evidence.decide(ev.result, ev.gpu_evidence, hint)
    elif hint is not None:
        raise end(*hint)
