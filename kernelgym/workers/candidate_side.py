"""The candidate's process: the solution module loaded, its ModelNew built and run on mapped inputs.

Everything here may be controlled by the candidate. It decides nothing: it asks the worker to build
(compilers run in the trusted worker), runs each batch and describes where its outputs are.
"""

from __future__ import annotations

import os
import socket

import torch

from kernelgym import kernels
from kernelgym.workers import messages as m
from kernelgym.workers.child import (
    M_PERTURB,
    BackwardPass,
    ChildJob,
    NoWorkModel,
    build_model,
    describe_outputs,
    error_meta,
    load_module,
    lowered_precision,
    mallopt,
    map_arena,
    map_ipc,
    run_batch,
    strict_fp32,
    value_from_wire,
)


def own_calls(launches) -> int:
    return kernels.KERNEL_STATS.calls + launches.count


class _Launches:
    """Counts launches of the solution's Triton kernels (the native loaders count their own calls)."""

    def __init__(self) -> None:
        self.count = 0

    def wrap_triton(self, module) -> None:
        try:
            from triton.runtime.jit import JITFunction
        except Exception:  # noqa: BLE001 - Triton missing: nothing to count
            return
        kinds: tuple = (JITFunction,)
        try:
            from triton.runtime.interpreter import InterpretedFunction

            kinds = (JITFunction, InterpretedFunction)
        except ImportError:  # an older Triton without the interpreter: compiled kernels only
            pass
        for value in list(vars(module).values()):
            target = getattr(value, "fn", None) if not isinstance(value, kinds) else value
            for fn in {id(x): x for x in (value, target) if isinstance(x, kinds)}.values():
                original = fn.run

                def run(*args, _original=original, **kwargs):
                    self.count += 1
                    return _original(*args, **kwargs)

                fn.run = run


def _ask_worker_to_build(sock: socket.socket, request: dict):
    """Send a build request to the trusted worker; the path of the finished artifact, or BuildError."""
    from pathlib import Path

    m.send(sock, m.Build(request))
    reply, _, _ = m.receive(sock)
    if not isinstance(reply, m.Built):
        raise kernels.BuildError(getattr(reply, "message", "compilation failed"), getattr(reply, "log", ""))
    return Path(reply.path)


def _route_builds(job: ChildJob, sock: socket.socket) -> None:
    """Every compiler run goes to the trusted worker; this process only loads what it built."""
    from torch.utils import cpp_extension

    from kernelgym.build import torch_ext

    kernels.remote_builder = lambda r: _ask_worker_to_build(
        sock, {"language": r.language, "source": r.source, "flags": list(r.flags)})
    kernels.remote_extension_builder = lambda r: _ask_worker_to_build(sock,
                                                                      {"language": "torch_ext",
                                                                       **r.to_meta()})
    cpp_extension.load_inline = torch_ext.load_inline
    cpp_extension.load = torch_ext.load
    if job.backend == "triton":
        from kernelgym.build import triton_build

        triton_build.route_builds_to(lambda r: _ask_worker_to_build(sock,
                                                                    {"language": "triton_module",
                                                                     **r.to_meta()}))
    kernels.cuda_compile_only = job.mode == "compile"
    if job.mode == "interpret":
        os.environ["TRITON_INTERPRET"] = "1"


class _CandidateSide:
    def __init__(self, job: ChildJob, sock: socket.socket, eval_dir: str):
        self.job, self.sock, self.eval_dir = job, sock, eval_dir
        self.launches = _Launches()
        self.kept: dict[int, list] = {}  # batch -> its outputs and mappings, alive until Release
        self.mapped: dict[int, list] = {}
        self.stage = "load"
        self.backward = BackwardPass(lambda: own_calls(self.launches)) if job.backward else None

    def load(self) -> bool:
        job = self.job
        torch.set_num_threads(job.threads)
        strict_fp32()
        if job.device.startswith("cuda"):
            # The CUDA context first: mapping the reference's inputs (CUDA IPC) in a process without one
            # crashes, and a ModelNew without parameters would never create it.
            torch.empty(1, device=job.device)
        _route_builds(job, self.sock)
        self.solution = load_module(job.solution_source, "solution",
                                    os.path.join(self.eval_dir, "solution.py"))
        if not isinstance(getattr(self.solution, "ModelNew", None), type):
            m.send(self.sock, m.Failed("load", "contract", "the module defines no class ModelNew"))
            return False
        self.launches.wrap_triton(self.solution)
        m.send(self.sock, m.Loaded())
        return job.mode != "compile"

    def construct(self, msg: m.Construct) -> None:
        self.stage = "init"
        args = [value_from_wire(v) for v in msg.init_args]
        self.model = build_model(self.solution.ModelNew, args, msg.init_seed, getattr(torch, self.job.dtype),
                                 self.job.device)
        m.send(self.sock, m.Constructed())

    def run(self, msg: m.RunBatch, fds: list[int]) -> None:
        self.stage = "forward"
        device = self.job.device
        calls_before = own_calls(self.launches)
        keep: list = []
        if msg.map_only:  # GPU: map the reference's input sets now, outside the timed batch
            self.mapped[msg.batch] = map_ipc(msg.ipc, device)
            m.send(self.sock, m.BatchDone(msg.batch))
            return
        if fds:
            arena, calls = map_arena(fds[0], msg.layout)
            keep.append(arena)
        else:
            calls = self.mapped.get(msg.batch) or map_ipc(msg.ipc, device)
        profile: dict = {}
        backward_before = self.backward.kernel_calls if self.backward else 0
        if msg.profile:
            from kernelgym.evaluation.profile import own_kernel_names, profile_batch

            own = own_kernel_names(self.solution, self.job.solution_source)
            no_work = None
            if not device.startswith("cuda"):  # only the CPU profile measures the harness
                stand_in = NoWorkModel(calls, self.backward is not None, device)
                no_work = lambda: run_batch(stand_in, calls, device,
                                            BackwardPass() if self.backward else None)
            described_inside: list = []

            def profiled():
                outs = run_batch(self.model, calls, device, self.backward)
                if device.startswith("cuda"):  # copies it makes are launches the profile must show too
                    described_inside.append(describe_outputs(outs, device, keep, calls=calls))
                return outs

            outputs, profile = profile_batch(profiled, device, self.launches, own, no_work)
            described = described_inside[0] if described_inside else None
        else:
            outputs, described = run_batch(self.model, calls, device, self.backward), None
        if described is None:
            described = describe_outputs(outputs, device, keep, calls=calls)
        keep += [outputs, calls]
        self.kept[msg.batch] = keep
        backward_calls = self.backward.kernel_calls - backward_before if self.backward else -1
        m.send(self.sock, m.BatchDone(msg.batch, described, [], own_calls(self.launches) - calls_before,
                                      lowered_precision(self.job.dtype), profile, backward_calls))


def run_candidate(job: ChildJob, sock: socket.socket, eval_dir: str) -> None:
    if job.fill_new_memory:
        _fill_new_memory()
    side = _CandidateSide(job, sock, eval_dir)
    try:
        if not side.load():
            return
        while True:
            msg, _, fds = m.receive(sock)
            if isinstance(msg, m.Construct):
                side.construct(msg)
            elif isinstance(msg, m.RunBatch):
                side.run(msg, fds)
            elif isinstance(msg, m.Release):
                side.kept.pop(msg.batch, None)
                side.mapped.pop(msg.batch, None)
            else:
                return
    except BaseException as exc:  # noqa: BLE001 - reported to the trusted side, which decides
        m.send(sock, error_meta(side.stage, exc))


def _fill_new_memory() -> None:
    """Every block malloc hands out from now on filled with bytes 0x7f (3.4e38 as float32): glibc's
    M_PERTURB, whose fill is the value's complement. Memory this process got before is not touched."""
    mallopt((M_PERTURB, 0x7F ^ 0xFF))
