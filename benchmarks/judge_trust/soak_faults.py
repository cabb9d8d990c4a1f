"""The outside world of benchmarks/judge_trust/soak.py: a small tmpfs for the cache, a memory cgroup for the
judge, the fault injector, and a sampler of the workers' memory and file descriptors."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from kernelgym.workers.worker import CHILDREN_FILE

# processes ------------------------------------------------------------------------------------------------


def _stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()  # [state, ppid, ...]


def alive(pid: int, started: str | None = None) -> bool:
    """Running (not a zombie), and the same process when its start time is given."""
    try:
        fields = _stat(pid)
    except (OSError, IndexError):
        return False
    return fields[0] != "Z" and (started is None or fields[19] == started)


def _living() -> list[tuple[int, list[str]]]:
    """(pid, stat fields) of every process that is not a zombie (read from /proc/*/stat, as ps does)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                fields = _stat(int(name))
            except (OSError, IndexError):
                continue
            if fields[0] != "Z":
                found.append((int(name), fields))
    return found


def descendants(root: int) -> list[int]:
    """Living processes below `root`."""
    parent = {pid: int(fields[1]) for pid, fields in _living()}
    found, frontier = [], {root}
    while frontier:
        frontier = {pid for pid, ppid in parent.items() if ppid in frontier}
        found += sorted(frontier)
    return found


def judge_processes_since(started_ticks: int) -> list[int]:
    """Living processes started at or after `started_ticks` (boot clock ticks) that run kernelgym's worker
    module: whatever a worker forked (evaluation processes, a PID namespace's helper and its candidate)
    carries the worker's command line, wherever it was reparented to, stopped or not. Run the soak alone."""
    found = []
    for pid, fields in _living():
        if pid == os.getpid() or int(fields[19]) < started_ticks:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read()
        except OSError:
            continue
        if b"kernelgym.workers.worker" in command.split(b"\0"):
            found.append(pid)
    return sorted(found)


def evaluation_processes(worker_pid: int) -> list[int]:
    """The worker's forked evaluation processes (python, not a compiler), oldest first."""
    try:
        with open(f"/proc/{worker_pid}/task/{worker_pid}/children") as f:
            kids = [int(p) for p in f.read().split()]
        exe = os.readlink(f"/proc/{worker_pid}/exe")
    except OSError:
        return []
    same = []
    for pid in kids:
        try:
            if os.readlink(f"/proc/{pid}/exe") == exe and alive(pid):
                same.append((int(_stat(pid)[19]), pid))
        except (OSError, IndexError):
            continue
    return [pid for _, pid in sorted(same)]


def rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def fd_count(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


# the machine ------------------------------------------------------------------------------------------------


def tmpfs(path: str, size_mb: int) -> str | None:
    """A tmpfs of `size_mb` at `path` (root only); None when it cannot be mounted."""
    os.makedirs(path, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755", "tmpfs", path],
        capture_output=True,
        check=False,
    )
    return path if done.returncode == 0 else None


class JudgeCgroup:
    """A memory cgroup the judge's processes are moved into, so a hog inside it runs the OOM killer on them
    (and on nothing else of the machine)."""

    def __init__(self, path: Path, v2: bool):
        self.path, self.v2 = path, v2

    @classmethod
    def create(cls, limit_mb: int) -> JudgeCgroup | None:
        v1 = Path("/sys/fs/cgroup/memory")
        v2 = not v1.is_dir()
        path = (Path("/sys/fs/cgroup") if v2 else v1) / f"kernelgym-soak-{os.getpid()}"
        try:
            path.mkdir()
            (path / ("memory.max" if v2 else "memory.limit_in_bytes")).write_text(str(limit_mb << 20))
        except OSError:
            return None
        return cls(path, v2)

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    def add(self, pid: int) -> None:
        """Move a judge process in, first in line for the OOM killer (it and all it forks later): the hog
        beside it must not be the victim, as on a host whose memory ran out under the judge."""
        try:
            Path(f"/proc/{pid}/oom_score_adj").write_text("1000")
            self.procs.write_text(str(pid))
        except OSError:  # it already ended
            pass

    def anon(self) -> int:
        """Anonymous memory charged here (page cache left out: the kernel reclaims it before an OOM)."""
        key = "anon" if self.v2 else "total_rss"
        for line in (self.path / "memory.stat").read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
        return 0

    def limit(self) -> int:
        return int((self.path / ("memory.max" if self.v2 else "memory.limit_in_bytes")).read_text())

    def remove(self) -> None:
        parent = self.path.parent / "cgroup.procs"
        for _ in range(50):
            pids = [p for p in self.procs.read_text().split() if p]
            for pid in pids:
                try:
                    parent.write_text(pid)
                except OSError:
                    pass
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.1)


HOG = """
import os, sys, time
procs, want, hold = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
with open(procs, "w") as f:
    f.write(str(os.getpid()))
chunks, got, end = [], 0, time.monotonic() + 10
while got < want and time.monotonic() < end:
    chunks.append(b"\\1" * (16 << 20))
    got += 16 << 20
time.sleep(hold)
"""


# the sampler ------------------------------------------------------------------------------------------------


class Sampler:
    """Every 0.2 s: moves new workers into the judge cgroup and notes every evaluation process forked; every
    `every_s`: each worker's RSS and open fds (with the evaluations it has done), and this process's."""

    def __init__(self, pool, cgroup: JudgeCgroup | None, every_s: float = 2.0):
        self.pool, self.cgroup, self.every_s = pool, cgroup, every_s
        self.samples: list[dict] = []
        self.forked: dict[int, str] = {}
        self.progress = lambda: 0
        self._moved: set[int] = set()
        self._first_count: dict[int, int] = {}  # worker pid -> the slot's tasks_done when first seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        last = 0.0
        while not self._stop.wait(0.2):
            self._track()
            if time.monotonic() - last >= self.every_s:
                last = time.monotonic()
                self._sample()
        self._track()

    def _track(self) -> None:
        for worker in self.pool._workers:
            process = worker.process
            if process is None:
                continue
            if self.cgroup is not None and process.pid not in self._moved:
                self.cgroup.add(process.pid)
                self._moved.add(process.pid)
            try:
                lines = (
                    Path(self.pool.work_root, f"worker-{worker.index}", CHILDREN_FILE).read_text().split("\n")
                )
            except OSError:
                continue
            for line in lines:
                pid, _, started = line.partition(" ")
                if pid.isdigit() and started:
                    self.forked[int(pid)] = started

    def _sample(self) -> None:
        workers = []
        for worker in self.pool._workers:
            process = worker.process
            if process is not None and process.poll() is None:
                rss, fds = rss_mb(process.pid), fd_count(process.pid)
                # A slot's count is reset only once its new worker is ready: count from the first sighting.
                first = self._first_count.setdefault(process.pid, worker.tasks_done)
                done = worker.tasks_done - first if worker.tasks_done >= first else worker.tasks_done
                if rss is not None and fds is not None:
                    workers.append({"pid": process.pid, "tasks_done": done, "rss_mb": rss, "fds": fds})
        self.samples.append(
            {
                "t": time.time(),
                "episodes": self.progress(),
                "workers": workers,
                "main_rss_mb": rss_mb(os.getpid()),
                "main_fds": fd_count(os.getpid()),
                "judge_processes": len(descendants(os.getpid())),
            }
        )

    def forked_alive(self) -> list[int]:
        self._track()
        return [pid for pid, started in self.forked.items() if alive(pid, started)]

    def trend(self) -> dict:
        """Growth of worker RSS and fds with the evaluations each worker has done (a leak grows with work,
        whatever
        the restarts; a worker that has not finished its first evaluation is still starting and left out), and
        of this process's fds and RSS with the episodes finished."""
        points = [
            (w["tasks_done"], w["rss_mb"], w["fds"])
            for s in self.samples
            for w in s["workers"]
            if w["tasks_done"] >= 1
        ]
        main = [
            (s["episodes"], s["main_fds"], s["main_rss_mb"])
            for s in self.samples
            if s["main_fds"] is not None
        ]
        span = max((x for x, _, _ in points), default=1) - min((x for x, _, _ in points), default=1)
        rss_slope = _slope([(x, r) for x, r, _ in points]) * 100
        fd_slope = _slope([(x, f) for x, _, f in points]) * 100
        main_fd_slope = _slope([(x, f) for x, f, _ in main]) * 100
        main_rss_slope = _slope([(x, r) for x, _, r in main]) * 100
        # Flat: over the work a worker did here, the fitted growth stays under 50 MB and 2 fds; this process's
        # fds grow by less than 2 over the run.
        episodes = main[-1][0] - main[0][0] if main else 0
        flat = (
            rss_slope * span / 100 < 50 and fd_slope * span / 100 < 2 and main_fd_slope * episodes / 100 < 2
        )
        rss = [r for _, r, _ in points] or [0.0]
        fds = [f for _, _, f in points] or [0]
        text = (
            f"worker RSS {rss_slope:+.2f} MB and open fds {fd_slope:+.3f} per 100 evaluations of a worker "
            f"({len(points)} samples of ready workers, 1-{span + 1} evaluations per worker; RSS "
            f"{min(rss):.0f}-{max(rss):.0f} MB, fds {min(fds)}-{max(fds)}); this process: fds "
            f"{main_fd_slope:+.3f} and RSS {main_rss_slope:+.2f} MB per 100 episodes "
            f"(fds {main[0][1] if main else '?'} -> {main[-1][1] if main else '?'}, RSS "
            f"{main[0][2] if main else 0:.0f} -> {main[-1][2] if main else 0:.0f} MB)"
        )
        return {
            "worker_rss_mb_per_100_evals": rss_slope,
            "worker_fds_per_100_evals": fd_slope,
            "main_fds_per_100_episodes": main_fd_slope,
            "main_rss_mb_per_100_episodes": main_rss_slope,
            "evaluations_per_worker_max": span + 1,
            "flat": flat,
            "text": text,
            "samples": len(self.samples),
        }


def _slope(points: list[tuple[float, float]]) -> float:
    if len(points) < 2:
        return 0.0
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / var if var else 0.0


# the injector -----------------------------------------------------------------------------------------------


class Injector:
    """Injects one fault at a time, at random times (exponential gaps, mean `fault_every_s`)."""

    def __init__(self, pool, kinds: list[str], config, cache_dir: str, cgroup: JudgeCgroup | None, sampler):
        self.pool, self.kinds, self.config = pool, kinds, config
        self.cache_dir, self.cgroup, self.sampler = cache_dir, cgroup, sampler
        self.rng = random.Random(config.seed + 7)
        self.faults: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        if self.kinds:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.rng.expovariate(1.0 / self.config.fault_every_s)):
            kind = self.rng.choice(self.kinds)
            at = time.time()
            try:
                hit, target = getattr(self, f"_{kind}")()
            except Exception as exc:  # noqa: BLE001 (a failed injection is reported, never fatal)
                hit, target = False, f"error: {type(exc).__name__}: {exc}"
            self.faults.append({"time": at, "end": time.time(), "kind": kind, "hit": hit, "target": target})

    def _victim(self, role: str) -> int | None:
        """A process of an evaluation in flight: its worker, reference (oldest) or candidate (youngest)."""
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and not self._stop.is_set():
            choices = []
            for worker in self.pool._workers:
                process = worker.process
                if process is None or process.poll() is not None:
                    continue
                kids = evaluation_processes(process.pid)
                if role == "worker" and kids:
                    choices.append(process.pid)
                elif role == "reference" and kids:
                    choices.append(kids[0])
                elif role == "candidate" and len(kids) >= 2:
                    choices.append(kids[-1])
            if choices:
                return self.rng.choice(choices)
            time.sleep(0.02)
        return None

    def _kill(self, role: str) -> tuple[bool, str]:
        pid = self._victim(role)
        if pid is None:
            return False, "no evaluation in flight"
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return False, f"{pid} ended first"
        return True, str(pid)

    def _worker(self):
        return self._kill("worker")

    def _reference(self):
        return self._kill("reference")

    def _candidate(self):
        return self._kill("candidate")

    def _disk(self) -> tuple[bool, str]:
        st = os.statvfs(self.cache_dir)
        size = st.f_bavail * st.f_frsize - (1 << 20)
        path = os.path.join(self.cache_dir, ".soak-fill")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.posix_fallocate(fd, 0, max(size, 1))
            self._stop.wait(self.config.disk_hold_s)
        finally:
            os.close(fd)
            os.unlink(path)
        return True, f"{size >> 20} MiB for {self.config.disk_hold_s} s"

    def _memory(self) -> tuple[bool, str]:
        before = _oom_kills()
        want = self.cgroup.limit() - self.cgroup.anon() + (64 << 20)
        hog = subprocess.Popen([sys.executable, "-c", HOG, str(self.cgroup.procs), str(want), "1.0"])
        try:
            hog.wait(timeout=30)
        except subprocess.TimeoutExpired:
            hog.kill()
            hog.wait()
        kills = _oom_kills() - before
        return kills > 0, f"hog of {want >> 20} MiB; the OOM killer killed {kills} process(es)"

    def summary(self) -> dict:
        out = {}
        for kind in self.kinds:
            mine = [f for f in self.faults if f["kind"] == kind]
            out[kind] = {
                "injected": len(mine),
                "hit": sum(f["hit"] for f in mine),
                "missed": dict(Counter(f["target"] for f in mine if not f["hit"])),
            }
        return out


def _oom_kills() -> int:
    from kernelgym.workers.pool import oom_kills

    return oom_kills()
