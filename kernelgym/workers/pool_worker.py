"""One worker of an EvalPool, from the caller's side: its start (a scrubbed environment, a folder of its own,
its GPU and its timing core), the jobs it is sent, its replacement after a crash, a hang or
`max_tasks_per_worker` evaluations, and the sweep of what a dead worker left running."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from multiprocessing.connection import Connection
from pathlib import Path

from kernelgym.evaluation.job import EvalJob
from kernelgym.evaluation.result import EvalResult, Verdict
from kernelgym.workers.pool_config import PoolConfig, scrubbed_env, timing_cores
from kernelgym.workers.pool_faults import failed_result, spoiled
from kernelgym.workers.worker import CHILDREN_FILE, start_time


class PoolWorker:
    """The caller's end of one worker process: started when needed, replaced when it fails."""

    def __init__(self, index: int, config: PoolConfig, work_root: str, cache_root: Path, gpu: bool,
                 gpu_count: int):
        self.index = index
        self.config = config
        self.work_root = work_root  # the pool's: this worker's folder is worker-<index> inside
        self.cache_root = cache_root
        self.gpu, self.gpu_count = gpu, gpu_count
        self.process: subprocess.Popen | None = None
        self.conn: Connection | None = None
        self.tasks_done = 0
        self.started: int | None = None  # the worker process's start time (clock ticks since boot)

    def start(self) -> None:
        config = self.config
        ours, theirs = socket.socketpair()
        work_root = os.path.join(self.work_root, f"worker-{self.index}")
        os.makedirs(work_root, exist_ok=True)
        os.chmod(work_root, 0o755)
        extra = {
            "KERNELGYM_CACHE": str(self.cache_root), "HOME": work_root, "TMPDIR": work_root,
            "OMP_NUM_THREADS": str(config.options.threads), "PYTHONDONTWRITEBYTECODE": "1",
            # torch.cuda.is_available() (called by torch.utils.cpp_extension at import) asks NVML instead of
            # initializing the CUDA driver, which would make every process forked from the worker unusable.
            "PYTORCH_NVML_BASED_CUDA_CHECK": "1",
        }
        slots = 1  # one GPU timing slot per GPU the pool spreads its workers over
        if self.gpu and "CUDA_VISIBLE_DEVICES" not in os.environ:
            slots = max(1, self.gpu_count)
            extra["CUDA_VISIBLE_DEVICES"] = str(self.index % slots)
        reserved = timing_cores(config, self.gpu, slots)
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
            spares = self.gpu and config.warm_up
        self.conn.send({"work_root": work_root, "sandbox": config.sandbox, "has_gpu": self.gpu,
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
        work_root = os.path.join(self.work_root, f"worker-{self.index}")
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
                kill_if_same(int(pid), started, self.started)
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
            said = f"worker_timeout: the worker gave no answer in {limit:.0f} s; it was replaced"
            return failed_result(job, Verdict.INFRASTRUCTURE_ERROR, said)
        except (EOFError, OSError) as exc:
            self.stop()
            return failed_result(job, Verdict.INFRASTRUCTURE_ERROR,
                                 f"worker_crash: the worker died ({type(exc).__name__}); it was replaced")
        self.tasks_done += 1
        if self.tasks_done >= self.config.max_tasks_per_worker or spoiled(result):
            self.stop()
        return result


def kill_if_same(pid: int, started: str, worker_started: int) -> None:
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

