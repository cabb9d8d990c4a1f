"""Stage 2, the reference's start: its process (and the candidate's, whose start-up overlaps it) started or
taken from the worker's spares, up to the task's init arguments; then, once the candidate has loaded beside
it, the reference's model built and run once (`reference_ready`).
"""

from __future__ import annotations

import os
import time

from kernelgym.evaluation.conversation import from_reference, reference_answering
from kernelgym.evaluation.machine import tree_memory_bytes
from kernelgym.evaluation.state import Evaluation
from kernelgym.workers import cgroup
from kernelgym.workers import messages as m
from kernelgym.workers.candidate_side import run_candidate
from kernelgym.workers.process import EvalProcess
from kernelgym.workers.reference_side import run_reference


def start_reference(ev: Evaluation) -> None:
    """The reference's process, up to the task's init arguments (what the candidate's construction needs);
    its model and first call follow while the candidate loads, unless the machine's peaks are measured
    (nothing else may run then: the candidate starts once the reference is ready)."""
    started = time.monotonic()
    job = ev.child_job
    measuring_peaks = job.roofline and ev.mode == "run" and job.cached_peaks is None
    spares = None if measuring_peaks else _take_spares(ev)
    if spares is not None:  # started before this job: their CUDA contexts are made
        ev.reference, ev.candidate = spares.reference, spares.candidate
        ev.reference.assign(job)
        ev.candidate.assign(job)
    else:
        ev.reference = spawn(ev, run_reference, "reference")
        if not measuring_peaks:  # its start-up (CUDA context, imports) overlaps the reference's
            ev.candidate = spawn(ev, run_candidate, "candidate")
    ev.reference_deadline = time.monotonic() + ev.options.timeout_s + 60
    with reference_answering(ev):
        ev.reference.hello(ev.reference_deadline)
    ev.result.stage_s["reference_hello"] = round(time.monotonic() - started, 3)
    ev.init_args = from_reference(ev, m.InitArgs).init_args
    if measuring_peaks:
        reference_ready(ev)


def reference_ready(ev: Evaluation) -> None:
    """The reference's model built and run once: the sizes of its inputs and outputs, its roofline."""
    if ev.ready is not None:
        return
    # its own limit runs from its start; a long build of the candidate's may have outlasted it meanwhile
    ev.reference_deadline = max(ev.reference_deadline, time.monotonic() + 1.0)
    ev.ready = from_reference(ev, m.Ready)
    for part, seconds in (ev.ready.startup_s or {}).items():
        if isinstance(seconds, int | float):
            ev.result.stage_s[f"reference_{part}"] = round(float(seconds), 3)
    _remember_roofline(ev, ev.ready)
    # its own start (its answer may have waited while the candidate loaded beside it)
    own = sum(v for v in (ev.ready.startup_s or {}).values() if isinstance(v, int | float))
    ev.result.stage_s["reference"] = round(ev.result.stage_s.get("reference_hello", 0.0) + own, 3)
    if _spares(ev) is not None:
        _spares(ev).refill(ev.cores)  # while the candidate's first batches run


def spawn(ev: Evaluation, target, name: str) -> EvalProcess:
    """A fresh evaluation process in a folder of its own; the candidate's joins its cgroup as it starts."""
    folder = os.path.join(ev.eval_dir, name)
    os.mkdir(folder)
    joins = (ev.watch.make_cgroup(ev.cores, tree_memory_bytes(ev.machine.sandbox))
             if target is run_candidate else None)
    return EvalProcess(target, ev.child_job, folder, ev.machine.sandbox, ev.device == "cuda",
                       cores=ev.cores, cgroup_files=joins)


def _spares(ev: Evaluation):
    """The worker's spare processes, where they suit this evaluation's device (a GPU worker's are
    GPU processes: a CPU evaluation there starts its own)."""
    spares = ev.machine.spares
    return spares if spares is not None and spares.uses_gpu == (ev.device == "cuda") else None


def _take_spares(ev: Evaluation):
    """A GPU worker's waiting pair of processes (start_reference forks the next once its reference is
    ready: forking on the way there would delay it)."""
    spares = _spares(ev)
    if spares is None:
        return None
    pair = spares.take(ev.cores)
    if pair is None:
        return None
    joins = ev.watch.make_cgroup(ev.cores, tree_memory_bytes(ev.machine.sandbox))
    # None of its code has run yet: every process it makes from now on is born inside, as after a fork.
    if joins and not cgroup.adopt(joins, pair.candidate.tree()):
        pair.discard()
        ev.watch.cgroup.remove()
        return None
    ev.spare_folder = pair.folder
    return pair


def _remember_roofline(ev: Evaluation, ready: m.Ready) -> None:
    """The machine's peaks and the task's counted cost, for every later evaluation on this machine."""
    from kernelgym.evaluation.roofline import Peaks, TaskCost

    machine = ev.machine
    if ready.peaks and not ev.child_job.cached_peaks:
        key = machine.peaks_key(ev.device, ev.options.threads, ev.job.dtype)
        machine.peaks.put(key, Peaks(**ready.peaks))
    if ready.flops is not None and not ev.child_job.cached_cost:
        machine.costs.put(machine.cost_key(ev.job), TaskCost(ready.flops, ready.min_bytes))
