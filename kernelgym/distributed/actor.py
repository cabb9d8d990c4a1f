"""The Ray actor: one single-machine EvalPool on one GPU (or a few CPUs) of one node.

Everything the single-machine judge guarantees holds inside the actor unchanged: its EvalPool spawns the
worker with a scrubbed environment, and every candidate runs sandboxed in a process forked from that worker.
The actor process itself never imports candidate code. Ray replaces an actor that dies (`max_restarts`) and
sends the evaluations it held to the replacement (`max_task_retries`).
"""

from __future__ import annotations

import os
import threading
from dataclasses import replace

from kernelgym.evaluation.job import EvalJob
from kernelgym.workers.pool import EvalPool, PoolConfig

DEFAULT_LOCK_DIR = "/tmp/kernelgym-locks"


class EvalActor:
    def __init__(self, pool_config: PoolConfig, cache_dir: str | None, gpu: bool):
        if cache_dir:
            os.environ["KERNELGYM_CACHE"] = cache_dir
        # The actor asks NVML, not the driver, whether a GPU exists (as the workers do).
        os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
        if gpu:
            # A timing slot per GPU: GPU actors of one node would otherwise queue on one machine-wide slot.
            import ray

            gpu_ids = "-".join(str(i) for i in ray.get_gpu_ids()) or "all"
            base = os.environ.get("KERNELGYM_LOCK_DIR", DEFAULT_LOCK_DIR)
            os.environ["KERNELGYM_LOCK_DIR"] = os.path.join(base, f"gpu-{gpu_ids}")
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
        return {"pid": os.getpid(), "node_id": ray.get_runtime_context().get_node_id(),
                "workers": self.pool.size, "running": running,
                "lock_dir": os.environ.get("KERNELGYM_LOCK_DIR")}

    def shutdown(self) -> None:
        """Stop the worker processes (before ray.kill, which ends the actor at once)."""
        self.pool.close()
