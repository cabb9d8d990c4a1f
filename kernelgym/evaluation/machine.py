"""What a worker knows of its machine, shared by every evaluation it runs: where a backend runs here, which
cores an evaluation gets, the caches of measured peaks, task costs and baselines, its spare processes, and
the job each evaluation process is handed (`child_job`).

Below the pipeline and the stages alike: both read it, neither is imported by it.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import asdict

from kernelgym import backends, kernels
from kernelgym.evaluation.job import EvalJob
from kernelgym.evaluation.options import EvalOptions
from kernelgym.evaluation.timing import TimingConfig
from kernelgym.workers.child import ChildJob
from kernelgym.workers.sandbox import SandboxConfig
from kernelgym.workers.spares import Spares


class Machine:
    """A worker's knowledge of its machine (one per worker, kept across its jobs)."""

    def __init__(self, work_root: str, sandbox: SandboxConfig, has_gpu: bool, slot: int = 0,
                 spares: bool = False, timing_core: int | None = None):
        from kernelgym.evaluation.baselines import BaselineCache
        from kernelgym.evaluation.roofline import Peaks, RecordCache, TaskCost

        self.work_root = work_root
        self.sandbox = sandbox
        self.has_gpu = has_gpu
        self.slot = slot  # the worker's index in its pool: concurrent workers time on different cores
        self.timing_core = timing_core  # GPU: where the slot's holder runs its timed batches (nothing else)
        self.baselines = BaselineCache(kernels.cache_root() / "baselines.json")
        self.peaks = RecordCache(kernels.cache_root() / "peaks.json", Peaks)
        self.costs = RecordCache(kernels.cache_root() / "task_costs.json", TaskCost)
        self.spares = Spares(work_root, sandbox, uses_gpu=has_gpu) if spares else None

    def evaluation_cores(self, device: str, threads: int) -> set[int]:
        """The cores an evaluation's two processes share on this worker (see `evaluation_cores`)."""
        return evaluation_cores(threads, self.slot, spread=device == "cuda" and self.timing_core is not None)

    def placement(self, backend: backends.Backend) -> tuple[str, str]:
        if backend.device == "cuda" and self.has_gpu:
            return "cuda", "run"
        if backend.device == "cuda":
            return "cpu", backend.without_gpu
        return "cpu", "run"

    def peaks_key(self, device: str, threads: int, dtype: str) -> str:
        """Peaks per machine, and per dtype beside float32 (a bf16 matmul peaks far higher on a GPU)."""
        key = self.fingerprint(device, threads)
        return key if dtype == "float32" else f"{key}|{dtype}"

    def cost_key(self, job: EvalJob) -> str:
        from kernelgym.tasks.task import content_hash

        return f"{content_hash(job.task_source)[:24]}|{job.dtype}|{'backward' if job.backward else 'forward'}"

    def fingerprint(self, device: str, threads: int) -> str:
        from kernelgym.evaluation.baselines import fingerprint

        return fingerprint(device, threads)

    def baseline_key(self, job: EvalJob, device: str) -> str:
        from kernelgym.tasks.task import content_hash

        fingerprint = self.fingerprint(device, job.options.threads)
        return f"{content_hash(job.task_source)[:24]}|{job.dtype}|{fingerprint}"

    def child_job(self, job: EvalJob, device: str, mode: str, seed_source) -> ChildJob:
        options = job.options
        peaks = self.peaks.get(self.peaks_key(device, options.threads, job.dtype))
        cost = self.costs.get(self.cost_key(job))
        return ChildJob(
            task_source=job.task_source, solution_source=job.solution_source, backend=job.backend,
            device=device,
            mode=mode, dtype=job.dtype, init_seed=seed_source.randrange(2**31), perturb=job.perturb,
            threads=options.threads, cached_peaks=asdict(peaks) if peaks else None,
            cached_cost=asdict(cost) if cost else None,
            timing_config=TimingConfig(trials=options.timing_trials, budget_s=options.timing_budget_s,
                                       subtract_sync_cost=options.subtract_sync_cost),
            backward=job.backward,
        )


def seed_source(options: EvalOptions):
    import random

    return secrets.SystemRandom() if options.seed is None else random.Random(options.seed)


class ReplayedSeeds:
    """A seed source that draws these values first, in order (an evaluation's draws replayed: its model's
    init seed, then input seeds), then fresh ones."""

    def __init__(self, values: list[int]):
        self._values = list(values)
        self._fresh = secrets.SystemRandom()

    def randrange(self, stop: int) -> int:
        return self._values.pop(0) if self._values else self._fresh.randrange(stop)


def evaluation_cores(threads: int, slot: int, spread: bool = False) -> set[int]:
    """The cores a reference and its candidate share: as many as the evaluation's threads, the next ones for
    the pool's next worker (by index: picked by pid, two workers could share a core and time each other).
    spread: a GPU evaluation where the pool keeps a core for timing (they are timed there): every core the
    worker may use, so that the two sides' start-up (each builds the task's model on the CPU) runs side by
    side rather than on one shared core."""
    available = sorted(os.sched_getaffinity(0))
    if spread:
        return set(available)
    start = (slot * threads) % len(available)
    return {available[(start + i) % len(available)] for i in range(min(threads, len(available)))}


def tree_memory_bytes(sandbox: SandboxConfig) -> int | None:
    """One memory limit for the candidate's whole tree: its per-process limit, at most half the host's
    memory, so that no tree of children can exhaust the host (whose OOM kills are read as the judge's)."""
    if sandbox.tree_memory_limit_mb:
        return sandbox.tree_memory_limit_mb << 20
    if not sandbox.memory_limit_mb:
        return None
    try:
        host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        host = 0
    limit = sandbox.memory_limit_mb << 20
    return min(limit, host // 2) if host else limit
