"""The persistent worker process (spawned by EvalPool with a scrubbed environment).

It imports torch but never candidate code and never initializes CUDA: every evaluation runs in processes
forked from it, so each candidate starts from the same clean state and a crash takes down only its own
process. Run as `python -m kernelgym.workers.worker FD`.
"""

from __future__ import annotations

import os
import sys
import traceback
from multiprocessing.connection import Connection


def _serve(conn: Connection) -> None:
    import torch

    torch.set_num_threads(1)  # no thread pool may exist when we fork
    config = conn.recv()
    if config.get("reserved_cores"):  # this worker, its builds and its evaluations stay off the timing cores
        from kernelgym.workers.procfs import pin_threads

        pin_threads(lambda: [os.getpid()], set(os.sched_getaffinity(0)) - set(config["reserved_cores"]))
    from kernelgym.workers.sandbox import no_inspection

    no_inspection()
    _preimport(config["has_gpu"], warm_up=config.get("warm_up", True))
    from kernelgym.evaluation.pipeline import Pipeline
    from kernelgym.evaluation.result import EvalResult, Verdict
    from kernelgym.workers import locks

    locks.prepare()
    os.makedirs(config["work_root"], exist_ok=True)
    _note_children(os.path.join(config["work_root"], CHILDREN_FILE))
    pipeline = Pipeline(config["work_root"], config["sandbox"], config["has_gpu"], config.get("slot", 0),
                        spares=config.get("spares", config["has_gpu"]), timing_core=config.get("timing_core"))
    from kernelgym.evaluation.options import EvalOptions

    pipeline.start_spares(EvalOptions().threads)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            job = conn.recv()
        except EOFError:
            job = None
        if job is None:
            pipeline.close()
            return
        try:
            result = pipeline.run(job)
        except Exception as exc:  # noqa: BLE001 - a bug of ours (the judge failed, not the candidate): an answer
            result = EvalResult(job.task_id, job.backend, job.size, Verdict.INFRASTRUCTURE_ERROR,
                                [f"internal_error: {type(exc).__name__}: {exc}"],
                                output_tail=traceback.format_exc()[-3000:])
        conn.send(result.to_dict())


CHILDREN_FILE = "children.pids"


def start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (with its pid, it names one process for good)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[19]


def _note_children(path: str) -> None:
    """Every process this worker forks (reference, candidate) writes its pid and start time to `path` first,
    so that when the worker dies (killed, out of memory) the pool can still find and kill what it left
    running.
    Compiler runs (subprocess, which runs no fork hooks) end on their own."""

    worker = os.getpid()

    def note() -> None:
        try:
            pid = os.getpid()
            # Only this worker's own children, as /proc names them: a process forked further down, or inside
            # a PID namespace of its own (where getpid() is 1, 2, ...), names another process of the host.
            if os.getppid() != worker or os.readlink("/proc/self") != str(pid):
                return
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, f"{pid} {start_time(pid)}\n".encode())
            finally:
                os.close(fd)
        except OSError:  # a full disk: the pool's sweep misses this one, nothing else breaks
            pass

    os.register_at_fork(after_in_child=note)


def _preimport(has_gpu: bool, warm_up: bool = True) -> None:
    """Import once here what every evaluation needs, so each forked process starts with it loaded; with
    warm_up, also pay here the one-time costs that only some evaluations meet.

    On a GPU machine nothing here may initialize the CUDA driver (it would be unusable in every forked
    process): the workers ask NVML whether a GPU exists (PYTORCH_NVML_BASED_CUDA_CHECK), and Triton's driver
    helper is compiled and loaded, never called.
    """
    import importlib

    names = ["numpy", "kernelgym.evaluation.profile", "kernelgym.evaluation.compare",
             "torch.utils._python_dispatch", "torch.profiler", "torch.utils.cpp_extension"]
    if has_gpu:
        # torch.profiler's first use in a process imports torch._dynamo: on the H200 that was 3.6 s of
        # every GPU evaluation's profile stage (and of each task's first reference, for the FLOP counter),
        # while it was left out of here (0.1-0.5 s with it). Imported here, it is paid once per worker.
        names.append("torch._dynamo")
    if not has_gpu:
        # Without a GPU, Triton can only interpret; the flag must be set before Triton is first imported.
        os.environ["TRITON_INTERPRET"] = "1"
    names += ["triton", "triton.language"]
    for name in names:
        try:
            importlib.import_module(name)
        # e.g. no Triton on this machine: the candidate will say so itself
        except Exception:  # noqa: BLE001, S110
            pass
    if not warm_up:
        return
    if has_gpu:
        _build_triton_driver()
        from kernelgym.workers.triton_warm import warm_compiler

        warm_compiler()
        return  # the GPU profile is torch.profiler's: the dispatch mode below serves CPU evaluations
    from kernelgym.evaluation.profile import warm_up as warm_profiler

    # The op timer's first use in a process imports torch._dynamo (about a second); paid here once rather
    # than in every CPU evaluation whose samples are too few to decide.
    warm_profiler()


def _build_triton_driver() -> None:
    """Triton compiles a C helper (its driver utilities) with the host compiler the first time a process
    launches a kernel, into its cache. Each evaluation has a private, empty cache, so each paid that second
    or so; built here once, from Triton's own source, every evaluation inherits it loaded."""
    try:
        import triton

        triton.runtime.driver.active.utils  # noqa: B018 (creating the driver builds and loads the helper)
    # no Triton, or no usable driver: the candidate's own launch will report it
    except Exception:  # noqa: BLE001, S110
        pass


def main() -> None:
    conn = Connection(int(sys.argv[1]))
    try:
        _serve(conn)
    finally:
        conn.close()
    # Told to stop: nothing is left to save, and the interpreter's teardown of torch takes most of a second
    # that the pool's close (and `kernelgym eval`) would wait for.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
