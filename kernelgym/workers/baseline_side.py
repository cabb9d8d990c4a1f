"""The reference timed alone, in its own trusted process, with no candidate: its eager time and, when asked,
torch.compile's (the worker's side of it is evaluation/reference_alone.py)."""

from __future__ import annotations

import socket

import torch

from kernelgym.evaluation import timing as timing_mod
from kernelgym.workers import protocol
from kernelgym.workers.child import (
    BackwardPass,
    ChildJob,
    as_list,
    build_model,
    load_module,
    make_inputs,
    strict_fp32,
    upstream_grads,
)


def _baseline_call(job: ChildJob, model, sets: list[list], dtype: torch.dtype):
    """One timed call of the reference alone: forward, or forward and backward for a backward task."""
    if not job.backward:
        return lambda k: model(*sets[k])
    with torch.no_grad():
        shapes = [list(o.shape) for o in as_list(model(*sets[0]))]
    for k, seed in enumerate(job.trial_seeds):
        sets[k] = sets[k] + upstream_grads(seed, shapes, dtype, job.device)
    backward = BackwardPass()
    return lambda k: backward(model, sets[k])


def run_baseline(job: ChildJob, sock: socket.socket) -> None:
    """Times the reference alone: eager, and torch.compile of it when asked (no candidate involved)."""
    dtype = getattr(torch, job.dtype)
    torch.set_num_threads(job.threads)
    strict_fp32()
    try:
        task = load_module(job.task_source, "kernelgym_task")
        torch.manual_seed(job.init_seed)
        model = build_model(task.Model, list(task.get_init_inputs()), job.init_seed, dtype, job.device)
        sets = [make_inputs(task, s, p, job.perturb, dtype, job.device)
                for s, p in zip(job.trial_seeds, job.perturbed)]
        call = _baseline_call(job, model, sets, dtype)
        timer = timing_mod.Timer(job.device, job.timing_config.subtract_sync_cost)
        timer.calibrate()
        with torch.no_grad():
            eager = timing_mod.measure_alone(timer, call, len(sets), job.timing_config)
            compiled_ms: list[float] = []
            if job.compile_baseline:
                compiled = torch.compile(model)
                compiled_ms = timing_mod.measure_alone(timer, lambda k: compiled(*sets[k]), len(sets),
                                                       job.timing_config)
    except BaseException as exc:  # noqa: BLE001 - reported to the trusted side, which decides
        protocol.send(sock, "error", {"message": f"{type(exc).__name__}: {exc}"[:2000]})
        return
    protocol.send(sock, "baseline", {"eager_ms": eager, "compile_ms": compiled_ms})

