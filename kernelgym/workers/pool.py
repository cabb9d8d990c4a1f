"""EvalPool: persistent worker processes, shared by environments and benchmarks, that never hang.

Each worker is spawned with a scrubbed environment (no API keys or tokens) and a directory of its own;
it is replaced after a crash or a hang, and every `max_tasks_per_worker` evaluations.
"""

from __future__ import annotations

import os
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.connection import Connection

from kernelgym import backends
from kernelgym.backends.detect import wrong_backend
from kernelgym.errors import PoolClosedError
from kernelgym.evaluation import rules
from kernelgym.evaluation.options import EvalOptions
from kernelgym.evaluation.pipeline import EvalJob
from kernelgym.evaluation.result import EvalResult, Verdict
from kernelgym.evaluation.rules import reason
from kernelgym.tasks.task import Task
from kernelgym.workers.sandbox import SandboxConfig

# Variables a worker may inherit; everything else (API keys, tokens, cloud credentials) stays behind.
INHERITED_ENV = (
    "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "LD_LIBRARY_PATH", "PYTHONPATH", "VIRTUAL_ENV", "CUDA_HOME",
    "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "TORCH_CUDA_ARCH_LIST", "KERNELGYM_CUDA_ARCH", "CXX", "CC", "NVCC",
    "TRITON_PTXAS_PATH", "TRITON_LIBDEVICE_PATH", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "PYTHONUNBUFFERED",
    "KERNELGYM_LOCK_DIR",
)


@dataclass
class PoolConfig:
    workers: int | None = None  # default: one per GPU, else 2 on the CPU
    max_tasks_per_worker: int = 200
    start_timeout_s: float = 120.0
    work_root: str | None = None
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    options: EvalOptions = field(default_factory=EvalOptions)  # defaults for every evaluation
    gpu: bool | None = None  # None: detect


def has_gpu() -> bool:
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
        if self.pool.gpu and "CUDA_VISIBLE_DEVICES" not in os.environ:
            extra["CUDA_VISIBLE_DEVICES"] = str(self.index % max(1, self.pool.gpu_count))
        # the worker's log stays open for the worker's lifetime
        self.log = open(os.path.join(work_root, "worker.log"), "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kernelgym.workers.worker", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            env=scrubbed_env(extra), cwd=work_root, stdin=subprocess.DEVNULL, stdout=self.log,
            stderr=self.log,
        )
        theirs.close()
        self.conn = Connection(os.dup(ours.fileno()))
        ours.close()
        self.conn.send({"work_root": work_root, "sandbox": config.sandbox, "has_gpu": self.pool.gpu})
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
        if getattr(self, "log", None):
            self.log.close()

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
            return _failed(job, Verdict.TIMEOUT,
                           f"worker_timeout: no answer in {limit:.0f} s; the worker was replaced")
        except (EOFError, OSError) as exc:
            self.stop()
            return _failed(job, Verdict.CRASH,
                           f"worker_crash: the worker died ({type(exc).__name__}); it was replaced")
        self.tasks_done += 1
        if self.tasks_done >= self.pool.config.max_tasks_per_worker or _spoiled(result):
            self.stop()
        return result


def _spoiled(result: EvalResult) -> bool:
    """The judge failed, not the candidate (e.g. the worker's own process touched the CUDA driver, so forked
    processes can no longer use the GPU): the worker is replaced and the evaluation judged again."""
    return result.verdict is Verdict.INFRASTRUCTURE_ERROR


def _failed(job: EvalJob, verdict: Verdict, reason: str) -> EvalResult:
    return EvalResult(job.task_id, job.backend, job.size, verdict, [reason])


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
    return EvalJob(task.id, task.source_at(chosen), task.dtype, task.atol, task.rtol, task.perturb,
                   source, backend, chosen, opts)


class EvalPool:
    """Evaluate solutions in isolated workers. Thread-safe; use as a context manager or call close()."""

    def __init__(self, config: PoolConfig | None = None, **overrides):
        self.config = config or PoolConfig(**overrides)
        self.gpu = has_gpu() if self.config.gpu is None else self.config.gpu
        self.gpu_count = _gpu_count() if self.gpu else 0
        n = self.config.workers or (max(1, self.gpu_count) if self.gpu else 2)
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
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._workers = [_Worker(i, self) for i in range(n)]
        for worker in self._workers:
            self._idle.put(worker)
        self._executor = ThreadPoolExecutor(max_workers=n, thread_name_prefix="kernelgym-eval")
        self._closed = False
        self._lock = threading.Lock()

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
        worker = self._idle.get()
        try:
            result = worker.run(job)
            if _spoiled(result):  # not the candidate's doing: judge it again in the replaced worker
                result = worker.run(job)
            return result
        except Exception as exc:  # noqa: BLE001 - e.g. a worker that cannot start: an answer, not a hang
            return _failed(job, Verdict.CRASH, f"worker_error: {type(exc).__name__}: {exc}")
        finally:
            self._idle.put(worker)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._executor.shutdown(wait=True)
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
        from kernelgym.evaluation import default_pool

        return (default_pool, ())

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001, S110 - closing at interpreter exit may find half the world gone
            pass


def _gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:  # noqa: BLE001 - a broken driver is no GPU for choosing defaults
        return 0
