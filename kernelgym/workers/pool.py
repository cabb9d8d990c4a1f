"""EvalPool: persistent worker processes, shared by environments and benchmarks, that never hang.

Each worker is spawned with a scrubbed environment (no API keys or tokens) and a directory of its own;
it is replaced after a crash or a hang, and every `max_tasks_per_worker` evaluations.

Faults of the judge are never the candidate's: when a trusted process fails (the worker dies or hangs, the
pipeline reports `infrastructure_error`, the cache or work folder's disk is full, the kernel's OOM killer ran)
the evaluation runs again on a fresh worker, up to `PoolConfig.infra_retries` times, and then the answer is
`Verdict.INFRASTRUCTURE_ERROR` ("not judged"). Only what the candidate's own process does is charged to it.

Its configuration and what it detects of the machine: workers/pool_config.py; one worker's start, jobs and
end: workers/pool_worker.py; a judge's failure as a result, and the count of them: workers/pool_faults.py.
"""

from __future__ import annotations

import atexit
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from kernelgym import backends
from kernelgym.backends.detect import wrong_backend
from kernelgym.errors import ActionError, PoolClosedError
from kernelgym.evaluation import rules
from kernelgym.evaluation.job import EvalJob
from kernelgym.evaluation.options import EvalOptions
from kernelgym.evaluation.result import EvalResult, Verdict
from kernelgym.evaluation.rules import Reason, reason
from kernelgym.evaluation.static import static_check
from kernelgym.tasks.task import Task
from kernelgym.workers.pool_config import PoolConfig, gpu_count, has_gpu, scrubbed_env
from kernelgym.workers.pool_faults import InfraStats, failed_result, rule_of
from kernelgym.workers.pool_worker import PoolWorker
from kernelgym.workers.procfs import line_value


def _static_verdict(job: EvalJob) -> EvalResult | None:
    """The pipeline's static stage run in the caller's process (it only parses): a syntax error, a missing
    ModelNew or no kernel is answered without a worker. None when the source passes (the worker checks it
    again in its own pipeline)."""
    if job.options.baseline_only:  # the reference timed alone: there is no solution to check
        return None
    started = time.monotonic()
    static = static_check(job.solution_source, backends.get(job.backend), job.dtype)
    if static.passed:
        return None
    finding = Reason.parse(static.reasons[0])
    result = EvalResult(task_id=job.task_id, backend=job.backend, size=job.size,
                        verdict=finding.verdict or Verdict.CRASH, reasons=[finding], static=static)
    result.wall_s = round(time.monotonic() - started, 3)
    return result


# Verdicts a full disk or a host out of memory can produce in an honest evaluation (a build or a process
# killed, a write that failed); a wrong output or a rejected hack is never their doing.
_RESOURCE_VERDICTS = (Verdict.COMPILE_ERROR, Verdict.RUNTIME_ERROR, Verdict.CRASH, Verdict.TIMEOUT)


def oom_kills() -> int:
    """The kernel's count of OOM kills since boot (host and cgroup limits alike); -1 where unreadable."""
    try:
        return int(line_value("/proc/vmstat", "oom_kill ") or "")
    except ValueError:
        return -1


def make_job(task: Task, source: str | bytes, backend: str, size: str | None, defaults: EvalOptions,
             gpu: bool, **options) -> EvalJob:
    """The plain-data job of one evaluation: the task's source at the chosen size, solution and options."""
    opts = EvalOptions.from_kwargs(defaults, **options)
    backends.get(backend)
    chosen = size or opts.size or ("gpu" if gpu and backends.get(backend).device == "cuda" else "cpu")
    if not task.has_size(chosen):
        chosen = "gpu"
    if isinstance(source, bytes):
        source = source.decode("utf-8", "replace")
    if not isinstance(source, str):
        raise ActionError(f"a solution is its module's source text (str or bytes), not "
                          f"{type(source).__name__}")
    dtype, atol, rtol = task.dtype, task.atol, task.rtol
    if opts.dtype and opts.dtype != task.dtype:  # the task's tolerances are for its own dtype
        dtype, atol, rtol = opts.dtype, None, None
    return EvalJob(task.id, task.source_at(chosen), dtype, atol, rtol, task.perturb, source, backend, chosen,
                   opts, shape_limits=task.shape_limits_at(chosen), backward=task.backward)


class EvalPool:
    """Evaluate solutions in isolated workers. Thread-safe; use as a context manager or call close()."""

    def __init__(self, config: PoolConfig | None = None, **overrides):
        self.config = config or PoolConfig(**overrides)
        self.gpu = has_gpu() if self.config.gpu is None else self.config.gpu
        self.gpu_count = gpu_count() if self.gpu else 0
        n = self.config.workers or (max(1, self.gpu_count, (os.cpu_count() or 2) // 2) if self.gpu else 2)
        self._owns_root = self.config.work_root is None
        self.work_root = self.config.work_root or tempfile.mkdtemp(prefix="kernelgym-")
        os.chmod(self.work_root, 0o755)
        from kernelgym.kernels import cache_root

        self.cache_root = cache_root()
        self.cache_root.mkdir(parents=True, exist_ok=True)
        (self.cache_root / "native").mkdir(exist_ok=True)
        for folder in (self.cache_root, self.cache_root / "native"):
            try:
                os.chmod(folder, 0o755)
            except OSError:
                pass
        from kernelgym.build import cache

        cache.enforce_quota(self.cache_root)
        if self.config.warm_builds or (self.config.warm_builds is None and self.gpu):
            _warm_builds(self.cache_root)
        # Last in, first out: a caller that evaluates one candidate at a time keeps getting the same started
        # worker, not the next one in a ring that has yet to start.
        self._idle: queue.LifoQueue[PoolWorker] = queue.LifoQueue()
        self._workers = [PoolWorker(i, self.config, self.work_root, self.cache_root, self.gpu, self.gpu_count)
                         for i in range(n)]
        self._starting: list[threading.Thread] = []
        if self.config.prestart or (self.config.prestart is None and self.gpu):
            self._starting = [threading.Thread(target=self._prestart, args=(w,), daemon=True)
                              for w in self._workers]
            for thread in self._starting:
                thread.start()
        else:
            for worker in self._workers:
                self._idle.put(worker)
        self._executor = ThreadPoolExecutor(max_workers=n, thread_name_prefix="kernelgym-eval")
        self._closed = False
        self._lock = threading.Lock()
        self.infra = InfraStats()

    def _prestart(self, worker: PoolWorker) -> None:
        try:
            worker.start()
        except Exception:  # noqa: BLE001 (its first evaluation starts it again and reports why it cannot)
            worker.stop()
        self._idle.put(worker)

    @property
    def size(self) -> int:
        return len(self._workers)

    def make_job(self, task: Task, source: str | bytes, backend: str = "cpp", size: str | None = None,
                 **options) -> EvalJob:
        return make_job(task, source, backend, size, self.config.options, self.gpu, **options)

    def submit(self, task: Task, source: str | bytes, backend: str = "cpp", size: str | None = None,
               **options) -> Future[EvalResult]:
        if self._closed:
            raise PoolClosedError("this EvalPool is closed")
        return self.submit_job(self.make_job(task, source, backend, size, **options))

    def submit_job(self, job: EvalJob) -> Future[EvalResult]:
        """Evaluate a job made by `make_job` (possibly in another process: a job is plain data)."""
        if self._closed:
            raise PoolClosedError("this EvalPool is closed")
        return self._executor.submit(self._run, job)

    def evaluate(self, task: Task, source: str | bytes, backend: str = "cpp", size: str | None = None,
                 **options) -> EvalResult:
        return self.submit(task, source, backend, size, **options).result()

    def _run(self, job: EvalJob) -> EvalResult:
        mismatch = wrong_backend(job.solution_source, job.backend)
        if mismatch:  # a contract error that names both backends, before any worker is involved
            return failed_result(job, Verdict.COMPILE_ERROR, reason(rules.WRONG_BACKEND, mismatch))
        rejected = _static_verdict(job)
        if rejected is not None:  # the static stage needs no process: answered here, at once
            return rejected
        worker = self._idle.get()
        try:
            return self._judge(worker, job)
        finally:
            self._idle.put(worker)

    def _judge(self, worker: PoolWorker, job: EvalJob) -> EvalResult:
        """Run the job; after a fault of the judge, run it again on a fresh worker; at last, not judged."""
        causes: list[str] = []
        for attempt in range(self.config.infra_retries + 1):
            if attempt:
                worker.stop()  # the next run() starts a fresh worker
                with self._lock:
                    self.infra.rejudged += 1
                time.sleep(self.config.infra_backoff_s * 2 ** (attempt - 1))
            cause = self._disk_full()
            if cause is None:
                kills = oom_kills()
                try:
                    result = worker.run(job)
                except Exception as exc:  # noqa: BLE001 (e.g. a worker that cannot start: an answer, not a hang)
                    result = failed_result(job, Verdict.INFRASTRUCTURE_ERROR,
                                           f"worker_error: {type(exc).__name__}: {exc}")
                cause = self._infra_cause(result, kills)
                if cause is None:
                    if causes:  # its builds may now come from the cache the failed run filled
                        result.static.warnings.append(f"judged again after the judge's fault: "
                                                      f"{'; '.join(causes)}"[:500])
                    return result
            causes.append(cause)
            with self._lock:
                self.infra.causes[rule_of(cause)] += 1
        with self._lock:
            self.infra.not_judged += 1
        return failed_result(job, Verdict.INFRASTRUCTURE_ERROR,
                             f"infrastructure_error: the judge failed {len(causes)} times; not judged "
                             f"({'; '.join(causes)})"[:2000])

    def _infra_cause(self, result: EvalResult, oom_before: int) -> str | None:
        """Why `result` is the judge's failure rather than the candidate's, or None when it stands."""
        if result.verdict is Verdict.INFRASTRUCTURE_ERROR:  # the pipeline's word: a trusted process failed
            return str(result.reasons[0]) if result.reasons else "infrastructure_error"
        if result.verdict not in _RESOURCE_VERDICTS:
            return None
        full = self._disk_full()
        if full is not None:
            return full
        if result.candidate_oom_kills:  # killed at its own tree's limit: the candidate's failure
            return None
        if oom_before >= 0 and oom_kills() > oom_before:
            return (f"host_oom: the kernel's OOM killer ran during the evaluation "
                    f"(verdict was {result.verdict.value})")
        return None

    def _disk_full(self) -> str | None:
        floor = self.config.min_free_disk_mb << 20
        for name, folder in (("cache", self.cache_root), ("work", self.work_root)):
            try:
                free = shutil.disk_usage(folder).free
            except OSError:
                continue
            if free < floor:
                return f"disk_full: {free >> 20} MiB free in the {name} folder {folder}"
        return None

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._executor.shutdown(wait=True)
        for thread in self._starting:
            thread.join()
        for worker in self._workers:
            worker.stop()
        if self._owns_root:
            shutil.rmtree(self.work_root, ignore_errors=True)

    def __enter__(self) -> EvalPool:  # noqa: PYI034 - Python 3.10 has no typing.Self
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # A pool is a shared resource: gymnasium deep-copies env specs (whose kwargs hold it) and AsyncVectorEnv
    # pickles them. A copy is the pool itself; an unpickled pool is the receiving process's default pool.
    def __deepcopy__(self, memo) -> EvalPool:
        return self

    def __reduce__(self):
        return (default_pool, ())

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001, S110 - closing at interpreter exit may find half the world gone
            pass


def _warm_builds(cache: Path) -> None:
    """torch's headers and the common binders, built by a process of their own that nothing waits for (a
    build that needs one first makes its own copy; `torch_ext_split.warm_up`)."""
    try:
        subprocess.Popen([sys.executable, "-m", "kernelgym.build.torch_ext_split"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                         env=scrubbed_env({"KERNELGYM_CACHE": str(cache)}))
    except OSError:  # the first build pays for them instead
        pass


# the process-wide pool -----------------------------------------------------------------------------------

_default_pool = None
_default_lock = threading.Lock()


def _forget_inherited_pool() -> None:
    # A forked child (e.g. an AsyncVectorEnv worker) inherits this object, whose sockets lead to the parent's
    # workers: it must start its own pool (and the lock may have been held at the fork).
    global _default_pool, _default_lock
    _default_pool = None
    _default_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_inherited_pool)


def default_pool():
    """The process-wide pool that `evaluate()` and the environments share (created on first use)."""
    global _default_pool
    with _default_lock:
        if _default_pool is None or _default_pool._closed:
            _default_pool = EvalPool()
            atexit.register(_default_pool.close)
        return _default_pool
