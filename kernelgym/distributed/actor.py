"""The Ray actor: one single-machine EvalPool on one GPU (or a few CPUs) of one node.

Everything the single-machine judge guarantees holds inside the actor unchanged: its EvalPool spawns the
worker with a scrubbed environment, and every candidate runs sandboxed in a process forked from that worker.
The actor process itself never imports candidate code. Ray replaces an actor that dies (`max_restarts`) and
sends the evaluations it held to the replacement (`max_task_retries`).

On a node of several GPUs each actor has its GPU's own timing slot (a lock folder of its own) and its own
slice of the node's cores (its workers, their builds and the processes they time inherit it).
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import replace

from kernelgym.distributed.placement import core_slice
from kernelgym.evaluation.job import EvalJob
from kernelgym.workers.pool import EvalPool, PoolConfig

DEFAULT_LOCK_DIR = "/tmp/kernelgym-locks"


class EvalActor:
    def __init__(self, pool_config: PoolConfig, cache_dir: str | None, gpu: bool, cpu_fraction: float = 1.0,
                 rank: int = 0):
        import ray

        if cache_dir:
            os.environ["KERNELGYM_CACHE"] = cache_dir
        # The actor asks NVML, not the driver, whether a GPU exists (as the workers do).
        os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
        self.gpu_ids = [str(i) for i in ray.get_gpu_ids()] if gpu else []
        if gpu:
            # A timing slot per GPU: GPU actors of one node would otherwise queue on one machine-wide slot.
            base = os.environ.get("KERNELGYM_LOCK_DIR", DEFAULT_LOCK_DIR)
            os.environ["KERNELGYM_LOCK_DIR"] = os.path.join(base, f"gpu-{'-'.join(self.gpu_ids) or 'all'}")
            rank = _gpu_rank(self.gpu_ids, rank)
        # Set before the pool spawns anything: workers, compilers and timed processes inherit the slice.
        with contextlib.suppress(OSError, AttributeError):  # no affinity calls (not Linux): unpinned
            os.sched_setaffinity(0, core_slice(list(os.sched_getaffinity(0)), cpu_fraction, rank))
        if gpu and pool_config.warm_builds is None:
            # The actors of a node share its build cache: one warm-up of torch's headers (GPU 0's) does.
            pool_config = replace(pool_config, warm_builds=rank == 0)
        self.pool = EvalPool(replace(pool_config, gpu=gpu))
        self._running: dict[int, str] = {}
        self._lock = threading.Lock()

    def evaluate(self, job: EvalJob) -> dict:
        key = threading.get_ident()
        with self._lock:
            self._running[key] = job.task_id
        try:
            return self.pool.submit_job(job).result().to_dict()
        finally:
            with self._lock:
                self._running.pop(key, None)

    def info(self) -> dict:
        """Where this actor runs and what it is judging now (answers while evaluations run)."""
        import ray

        with self._lock:
            running = sorted(self._running.values())
        workers = [w.process.pid for w in self.pool._workers
                   if w.process is not None and w.process.poll() is None]
        return {"pid": os.getpid(), "node_id": ray.get_runtime_context().get_node_id(),
                "workers": self.pool.size, "running": running, "worker_pids": workers,
                "gpu_ids": self.gpu_ids, "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "cores": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [],
                "lock_dir": os.environ.get("KERNELGYM_LOCK_DIR"), "rejudged": self.pool.infra.rejudged,
                "not_judged": self.pool.infra.not_judged}

    def shutdown(self) -> None:
        """Stop the worker processes (before ray.kill, which ends the actor at once)."""
        self.pool.close()


def _gpu_rank(gpu_ids: list[str], fallback: int) -> int:
    """The GPU's index on its node picks the actor's core slice (a replacement on the same GPU gets the same
    one)."""
    try:
        return int(gpu_ids[0])
    except (IndexError, ValueError):  # no id, or a UUID
        return fallback
