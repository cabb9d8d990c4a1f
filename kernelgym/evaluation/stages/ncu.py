"""Stage 7 (opt-in, GPU, after an `ok`), ncu: hardware counters per kernel from Nsight Compute, run on one
forward call in a sandboxed process of its own (evaluation/ncu.py). They inform; they never change the
verdict."""

from __future__ import annotations

import os
import time

from kernelgym.evaluation.result import ProfileResult
from kernelgym.evaluation.state import Evaluation
from kernelgym.workers import locks


def ncu(ev: Evaluation) -> None:
    """Hardware counters per kernel, after the verdict (they inform; they never change it)."""
    from kernelgym.evaluation import ncu as nsight

    result = ev.result
    if result.profile is None:
        result.profile = ProfileResult()
    if ev.device != "cuda":
        result.profile.ncu_note = "ncu: Nsight Compute profiles GPU kernels; this ran on the CPU"
        return
    started = time.monotonic()
    job_dir = os.path.join(ev.eval_dir, "ncu")
    os.mkdir(job_dir)
    spec = {"task_source": ev.job.task_source, "solution_source": ev.job.solution_source,
            "dtype": ev.job.dtype, "init_seed": ev.child_job.init_seed,
            "input_seed": ev.seeds(1)[0], "perturb": ev.job.perturb}
    with locks.device_lock(ev.device):
        found, note = nsight.collect(job_dir, spec, ev.machine.sandbox, ev.options.ncu_timeout_s)
    result.profile.kernels, result.profile.ncu_note = found, note
    result.stage_s["ncu"] = round(time.monotonic() - started, 3)
