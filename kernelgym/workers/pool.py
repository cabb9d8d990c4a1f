"""EvalPool: persistent worker processes, shared by environments and benchmarks, that never hang.

Each worker is spawned with a scrubbed environment (no API keys or tokens) and a directory of its own;
it is replaced after a crash or a hang, and every `max_tasks_per_worker` evaluations.

Faults of the judge are never the candidate's: when a trusted process fails (the worker dies or hangs, the
pipeline reports `infrastructure_error`, the cache or work folder's disk is full, the kernel's OOM killer ran)
the evaluation runs again on a fresh worker, up to `PoolConfig.infra_retries` times, and then the answer is
`Verdict.INFRASTRUCTURE_ERROR` ("not judged"). Only what the candidate's own process does is charged to it.
"""

from __future__ import annotations

import atexit
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
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
from kernelgym.workers.sandbox import SandboxConfig
from kernelgym.workers.worker import CHILDREN_FILE, start_time

# Variables a worker may inherit; everything else (API keys, tokens, cloud credentials) stays behind.
INHERITED_ENV = (
    "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "LD_LIBRARY_PATH", "PYTHONPATH", "VIRTUAL_ENV", "CUDA_HOME",
    "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "TORCH_CUDA_ARCH_LIST", "KERNELGYM_CUDA_ARCH", "CXX", "CC", "NVCC",
    "TRITON_PTXAS_PATH", "TRITON_LIBDEVICE_PATH", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "PYTHONUNBUFFERED",
    "KERNELGYM_LOCK_DIR",
)


def timing_cores(config: PoolConfig, gpu: bool, slots: int) -> list[int]:
    """The cores a GPU pool keeps for its timing slots' holders, one a slot (a slot a GPU the pool spreads its
    workers over): the last ones this process may use; none where that would leave the rest too few."""
    cores = sorted(os.sched_getaffinity(0))
    slots = max(1, slots)
    wanted = config.timing_core if config.timing_core is not None else len(cores) >= 4 * slots
    return cores[-slots:] if wanted and gpu and len(cores) >= 2 * slots else []


@dataclass
class PoolConfig:
    # default: half the cores on a GPU machine (builds run on every core, timing waits for its GPU's slot),
    # else 2 on the CPU
    workers: int | None = None
    # precompile torch's headers and the common binders in the background at start (None: on a GPU machine,
    # where most candidates are CUDA extensions; elsewhere the first build pays)
    warm_builds: bool | None = None
    # start every worker in the background at once (None: on a GPU machine, where a worker's start, ~6 s,
    # would otherwise land on the first evaluation each worker takes); elsewhere a worker starts when needed
    prestart: bool | None = None
    # False: a worker skips the warm-ups that pay off only over many evaluations (the CPU profiler's
    # dispatch mode, Triton's driver helper and compiler), for a pool that judges one candidate and closes
    # (`kernelgym eval FILE`); an evaluation that needs one pays it in its own process instead
    warm_up: bool = True
    # each worker keeps its next reference and candidate processes started, waiting for their job (None: on
    # a GPU machine, where a process's CUDA context costs about half a second of every evaluation, unless the
    # pool is for one evaluation, warm_up=False)
    spare_processes: bool | None = None
    # GPU: a core kept for the evaluation that holds a GPU's timing slot (one per GPU the pool uses), its two
    # processes moved there for their timed batches; builds and every other process of the pool stay off it
    # (None: where the machine has 4 cores or more a GPU). Beside other workers' builds, the slot's holder
    # shared its core and held the slot 2-3 times as long as alone.
    timing_core: bool | None = None
    max_tasks_per_worker: int = 200
    start_timeout_s: float = 120.0
    work_root: str | None = None
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    options: EvalOptions = field(default_factory=EvalOptions)  # defaults for every evaluation
    gpu: bool | None = None  # None: detect
    # Re-runs, each on a fresh worker, of an evaluation whose judge failed; then `infrastructure_error`.
    infra_retries: int = 2
    infra_backoff_s: float = 1.0  # wait before the first re-run, doubled for each next (a full disk clears)
    min_free_disk_mb: int = 64  # less free space than this in the cache or work folder is a full disk


# Where a GPU driver shows itself (NVIDIA's, or ROCm's for torch's HIP build): without any of them there is
# no GPU, and the caller's process need not import torch (about a second) to learn it.
GPU_DRIVER_PATHS = ("/dev/nvidiactl", "/dev/nvidia0", "/proc/driver/nvidia", "/dev/kfd")


def has_gpu() -> bool:
    if not any(os.path.exists(path) for path in GPU_DRIVER_PATHS):
        return False
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - a broken driver is no GPU for choosing defaults
        return False


def scrubbed_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in INHERITED_ENV}
    env.update(extra)
    return env


class _Worker:
    def __init__(self, index: int, pool: EvalPool):
        self.index = index
        self.pool = pool
        self.process: subprocess.Popen | None = None
        self.conn: Connection | None = None
        self.tasks_done = 0
        self.started: int | None = None  # the worker process's start time (clock ticks since boot)

    def start(self) -> None:
        config = self.pool.config
        ours, theirs = socket.socketpair()
        work_root = os.path.join(self.pool.work_root, f"worker-{self.index}")
        os.makedirs(work_root, exist_ok=True)
        os.chmod(work_root, 0o755)
        extra = {
            "KERNELGYM_CACHE": str(self.pool.cache_root), "HOME": work_root, "TMPDIR": work_root,
            "OMP_NUM_THREADS": str(config.options.threads), "PYTHONDONTWRITEBYTECODE": "1",
            # torch.cuda.is_available() (called by torch.utils.cpp_extension at import) asks NVML instead of
            # initializing the CUDA driver, which would make every process forked from the worker unusable.
            "PYTORCH_NVML_BASED_CUDA_CHECK": "1",
        }
        slots = 1  # one GPU timing slot per GPU the pool spreads its workers over
        if self.pool.gpu and "CUDA_VISIBLE_DEVICES" not in os.environ:
            slots = max(1, self.pool.gpu_count)
            extra["CUDA_VISIBLE_DEVICES"] = str(self.index % slots)
        reserved = timing_cores(config, self.pool.gpu, slots)
        # the worker's log stays open for the worker's lifetime
        self.log = open(os.path.join(work_root, "worker.log"), "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kernelgym.workers.worker", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            env=scrubbed_env(extra), cwd=work_root, stdin=subprocess.DEVNULL, stdout=self.log,
            stderr=self.log,
        )
        theirs.close()
        try:
            self.started = int(start_time(self.process.pid))
        except (OSError, IndexError, ValueError):
            self.started = None  # no /proc: nothing is swept
        self.conn = Connection(os.dup(ours.fileno()))
        ours.close()
        spares = config.spare_processes
        if spares is None:
            spares = self.pool.gpu and config.warm_up
        self.conn.send({"work_root": work_root, "sandbox": config.sandbox, "has_gpu": self.pool.gpu,
                        "slot": self.index, "warm_up": config.warm_up, "spares": spares,
                        "timing_core": reserved[self.index % len(reserved)] if reserved else None,
                        "reserved_cores": reserved})
        if not self.conn.poll(config.start_timeout_s):
            self.stop()
            raise RuntimeError(f"kernelgym worker {self.index} did not start; see {work_root}/worker.log")
        self.conn.recv()
        self.tasks_done = 0

    def stop(self) -> None:
        if self.conn is not None:
            try:
                self.conn.send(None)
            except OSError:
                pass
            self.conn.close()
            self.conn = None
        if self.process is not None:
            try:
                self.process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
            self._sweep()
        if getattr(self, "log", None):
            self.log.close()

    def _sweep(self) -> None:
        """After the worker is gone: kill the evaluation processes it left (a worker killed mid-evaluation
        never killed its reference and candidate) and remove their folders."""
        work_root = os.path.join(self.pool.work_root, f"worker-{self.index}")
        noted = os.path.join(work_root, CHILDREN_FILE)
        try:
            with open(noted) as f:
                lines = f.read().split("\n")
            os.unlink(noted)
        except OSError:
            lines = []
        for line in lines:
            pid, _, started = line.partition(" ")
            if pid.isdigit() and self.started is not None:
                _kill_if_same(int(pid), started, self.started)
        try:
            names = os.listdir(work_root)
        except OSError:
            names = []
        for name in names:
            if name.startswith("eval-"):
                shutil.rmtree(os.path.join(work_root, name), ignore_errors=True)

    def run(self, job: EvalJob) -> EvalResult:
        if self.process is None or self.process.poll() is not None:
            self.stop()
            self.start()
        options = job.options
        # The worker enforces every stage's limit itself; this outer bound only catches a worker that hangs.
        limit = options.build_timeout_s + 6 * options.timeout_s + 120
        try:
            self.conn.send(job)
            if not self.conn.poll(limit):
                raise TimeoutError
            data = self.conn.recv()
            result = EvalResult.from_dict(data)
        except TimeoutError:
            self.stop()
            return _failed(job, Verdict.INFRASTRUCTURE_ERROR,
                           f"worker_timeout: the worker gave no answer in {limit:.0f} s; it was replaced")
        except (EOFError, OSError) as exc:
            self.stop()
            return _failed(job, Verdict.INFRASTRUCTURE_ERROR,
                           f"worker_crash: the worker died ({type(exc).__name__}); it was replaced")
        self.tasks_done += 1
        if self.tasks_done >= self.pool.config.max_tasks_per_worker or _spoiled(result):
            self.stop()
        return result


def _spoiled(result: EvalResult) -> bool:
    """The judge failed, not the candidate (e.g. the worker's own process touched the CUDA driver, so forked
    processes can no longer use the GPU): the worker is replaced and the evaluation judged again."""
    return result.verdict is Verdict.INFRASTRUCTURE_ERROR


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


def _failed(job: EvalJob, verdict: Verdict, reason: str) -> EvalResult:
    """`reason` is "rule: message" with a rule of the catalogue (kernelgym.evaluation.rules)."""
    return EvalResult(job.task_id, job.backend, job.size, verdict, [Reason.parse(reason)])


# Verdicts a full disk or a host out of memory can produce in an honest evaluation (a build or a process
# killed, a write that failed); a wrong output or a rejected hack is never their doing.
_RESOURCE_VERDICTS = (Verdict.COMPILE_ERROR, Verdict.RUNTIME_ERROR, Verdict.CRASH, Verdict.TIMEOUT)


def oom_kills() -> int:
    """The kernel's count of OOM kills since boot (host and cgroup limits alike); -1 where unreadable."""
    try:
        with open("/proc/vmstat") as f:
            for line in f:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return -1


@dataclass
class InfraStats:
    """What the pool did about faults of the judge, over its lifetime (read by
    benchmarks/judge_trust/soak.py)."""

    rejudged: int = 0  # evaluations run again after an infrastructure fault
    not_judged: int = 0  # evaluations answered `infrastructure_error` once the re-runs were spent
    causes: Counter = field(default_factory=Counter)  # rule of each fault ("worker_crash", "disk_full", ...)
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
        self.gpu_count = _gpu_count() if self.gpu else 0
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
        self._idle: queue.LifoQueue[_Worker] = queue.LifoQueue()
        self._workers = [_Worker(i, self) for i in range(n)]
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

    def _prestart(self, worker: _Worker) -> None:
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
            return _failed(job, Verdict.COMPILE_ERROR, reason(rules.WRONG_BACKEND, mismatch))
        rejected = _static_verdict(job)
        if rejected is not None:  # the static stage needs no process: answered here, at once
            return rejected
        worker = self._idle.get()
        try:
            return self._judge(worker, job)
        finally:
            self._idle.put(worker)

    def _judge(self, worker: _Worker, job: EvalJob) -> EvalResult:
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
                    result = _failed(job, Verdict.INFRASTRUCTURE_ERROR,
                                     f"worker_error: {type(exc).__name__}: {exc}")
                cause = self._infra_cause(result, kills)
                if cause is None:
                    return result
            causes.append(cause)
            with self._lock:
                self.infra.causes[_rule(cause)] += 1
        with self._lock:
            self.infra.not_judged += 1
        return _failed(job, Verdict.INFRASTRUCTURE_ERROR,
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


def _kill_if_same(pid: int, started: str, worker_started: int) -> None:
    """SIGKILL the process `pid` (and its process group, unless that is this process's), only if it is still
    the one that started then, after the worker that forked it, and is not this process. A stopped process
    (the worker freezes the candidate while it reads its outputs) dies too."""
    try:
        if start_time(pid) != started or int(started) < worker_started or pid <= 1 or pid == os.getpid():
            return  # gone and the pid reused, or not a process of that worker
        # Not yet in a session of its own (e.g. killed with its worker before it got there): it alone.
        kills = (os.kill,) if os.getpgid(pid) == os.getpgrp() else (os.killpg, os.kill)
    except (OSError, IndexError, ValueError):
        return
    for kill in kills:
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
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


def _rule(reason: str) -> str:
    """The rule of a reason (the pipeline's and the pool's are typed alike)."""
    return Reason.parse(reason).rule


def _gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:  # noqa: BLE001 - a broken driver is no GPU for choosing defaults
        return 0


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
