"""A cgroup per candidate: its cores fixed from outside, its CPU time counted for its whole tree.

The trusted worker makes one cgroup per evaluation in the cpuset and cpuacct hierarchies (cgroup v1, as CI
mounts them; v2's unified tree where that is what the host has), and the forked candidate process joins it
before any candidate code runs, so every thread and process it ever makes is born inside. Then:

- cores: `cpuset.cpus` holds the reference's cores. `sched_setaffinity` inside a cpuset cannot reach a core
  outside it, and the candidate cannot write the cgroup's files: its mount namespace sees /sys/fs/cgroup
  read-only (workers/sandbox.py) and it holds no capability.
- CPU time: `cpuacct.usage` (v2: `cpu.stat` usage_usec) is every nanosecond any member ran, charged as it
  runs, so threads and children that exited are counted, and nothing has to be walked or summed in ticks.
- memory: where the memory controller is there, the whole tree gets one limit (`memory.limit_in_bytes`,
  v2 `memory.max`). Per-process address-space limits let a tree of children exhaust the host, and a host
  OOM kill during a failed evaluation is read as the judge's failure (retried, then not charged); the
  tree's own OOM kills (`oom_kill` in memory.oom_control, v2 memory.events) are the candidate's.

Where cgroups cannot be made (not root, no hierarchy mounted, a read-only /sys) `CandidateCgroup.create`
returns None with a one-line reason, and the worker falls back to the per-process accounting of
workers/process.py (affinity and /proc/PID/stat, clock ticks), saying so in the verdict's notes.
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass

ROOT = "/sys/fs/cgroup"
PARENT = "kernelgym"  # one folder per hierarchy holding every evaluation's cgroup
_serial = itertools.count()


@dataclass
class CandidateCgroup:
    """The cgroup folders (one per hierarchy) a candidate's tree lives in, and how to read its CPU time."""

    folders: tuple[str, ...]
    usage_file: str  # cpuacct.usage (ns) or, on v2, cpu.stat (usage_usec)
    oom_file: str = ""  # memory.oom_control (v1) or memory.events (v2); "" when memory is not limited

    @classmethod
    def create(cls, cores: set[int], memory_bytes: int | None = None) -> tuple[CandidateCgroup | None, str]:
        """A fresh cgroup confined to `cores` (and, where the memory controller is there, to `memory_bytes`
        for the whole tree), or (None, why not)."""
        if os.geteuid() != 0:
            return None, "not root: no cgroup for the candidate"
        name = f"eval-{os.getpid()}-{next(_serial)}-{time.monotonic_ns() % 10**9}"
        try:
            if os.path.isfile(os.path.join(ROOT, "cpuset", "cpuset.cpus")) and \
                    os.path.isfile(os.path.join(ROOT, "cpuacct", "cpuacct.usage")):
                return cls._v1(name, cores)._with_memory_v1(name, memory_bytes), ""
            if os.path.isfile(os.path.join(ROOT, "cgroup.controllers")):
                return cls._v2(name, cores, memory_bytes), ""
        except OSError as exc:
            return None, f"cgroup refused ({exc.strerror or exc}): {exc.filename or ''}".rstrip(": ")
        return None, f"no cpuset and cpuacct cgroup hierarchies mounted under {ROOT}"

    @classmethod
    def _v1(cls, name: str, cores: set[int]) -> CandidateCgroup:
        cpuset_parent = _parent(os.path.join(ROOT, "cpuset"))
        cpuacct_parent = _parent(os.path.join(ROOT, "cpuacct"))
        cpuset, cpuacct = os.path.join(cpuset_parent, name), os.path.join(cpuacct_parent, name)
        os.mkdir(cpuset)
        made = cls((cpuset,), "")
        try:
            _write(cpuset, "cpuset.mems", _read(cpuset_parent, "cpuset.mems"))
            _write(cpuset, "cpuset.cpus", _cpu_list(cores))
            os.mkdir(cpuacct)
        except OSError:
            made.remove()
            raise
        return cls((cpuset, cpuacct), os.path.join(cpuacct, "cpuacct.usage"))

    def _with_memory_v1(self, name: str, memory_bytes: int | None) -> CandidateCgroup:
        hierarchy = os.path.join(ROOT, "memory")
        if not memory_bytes or not os.path.isfile(os.path.join(hierarchy, "memory.limit_in_bytes")):
            return self
        folder = os.path.join(_parent(hierarchy), name)
        try:
            os.mkdir(folder)
            _write(folder, "memory.limit_in_bytes", str(memory_bytes))
        except OSError:
            try:
                os.rmdir(folder)
            except OSError:
                pass
            return self  # cores and CPU time still hold; the host's OOM rule stays as it was
        oom_file = os.path.join(folder, "memory.oom_control")
        return CandidateCgroup((*self.folders, folder), self.usage_file, oom_file)

    @classmethod
    def _v2(cls, name: str, cores: set[int], memory_bytes: int | None = None) -> CandidateCgroup:
        parent = os.path.join(ROOT, PARENT)
        os.makedirs(parent, exist_ok=True)
        _write(ROOT, "cgroup.subtree_control", "+cpuset +cpu")
        _write(parent, "cgroup.subtree_control", "+cpuset +cpu")
        limited = bool(memory_bytes)
        if limited:
            try:
                _write(ROOT, "cgroup.subtree_control", "+memory")
                _write(parent, "cgroup.subtree_control", "+memory")
            except OSError:
                limited = False
        folder = os.path.join(parent, name)
        os.mkdir(folder)
        made = cls((folder,), os.path.join(folder, "cpu.stat"))
        try:
            _write(folder, "cpuset.cpus", _cpu_list(cores))
            if limited:
                _write(folder, "memory.max", str(memory_bytes))
                made.oom_file = os.path.join(folder, "memory.events")
        except OSError:
            made.remove()
            raise
        return made

    def join_files(self) -> list[str]:
        """The files a process writes its pid into to enter (the forked candidate does, before anything)."""
        return [os.path.join(folder, "cgroup.procs") for folder in self.folders]

    def cpu_ns(self) -> int:
        """CPU time of every member so far, exited ones included, in ns."""
        with open(self.usage_file) as f:
            text = f.read()
        if self.usage_file.endswith("cpuacct.usage"):
            return int(text)
        usage = next(line for line in text.splitlines() if line.startswith("usage_usec"))
        return int(usage.split()[1]) * 1000

    def oom_kills(self) -> int:
        """Members the kernel killed at the tree's memory limit; 0 when memory is not limited."""
        if not self.oom_file:
            return 0
        try:
            with open(self.oom_file) as f:
                for line in f:
                    if line.startswith("oom_kill "):
                        return int(line.split()[1])
        except (OSError, ValueError):
            pass
        return 0

    def has_members(self) -> bool:
        with open(self.join_files()[0]) as f:
            return bool(f.read().strip())

    def cpus(self) -> str:
        return _read(self.folders[0], "cpuset.cpus")

    def remove(self) -> None:
        """Remove the folders once the tree is gone (a member still exiting can hold one for a moment)."""
        for folder in self.folders:
            for _ in range(50):
                try:
                    os.rmdir(folder)
                    break
                except FileNotFoundError:
                    break
                except OSError:  # EBUSY: a member is still being torn down
                    time.sleep(0.002)


def join(files: list[str]) -> None:
    """Called in the forked process before any candidate code: every thread it makes is born inside."""
    for path in files:
        with open(path, "w") as f:
            f.write("0")


def adopt(files: list[str], pids: list[int]) -> bool:
    """The trusted side moves processes started ahead of their job (a spare) in, before any candidate code:
    True when every one entered every hierarchy."""
    try:
        for path in files:
            for pid in pids:
                with open(path, "w") as f:
                    f.write(str(pid))
    except OSError:
        return False
    return True


def _parent(hierarchy: str) -> str:
    """The hierarchy's kernelgym folder; a cpuset one gets the root's cores and memory nodes (v1 starts a
    cpuset empty, and an empty one admits no task)."""
    parent = os.path.join(hierarchy, PARENT)
    try:
        os.mkdir(parent)
    except FileExistsError:
        pass
    if os.path.exists(os.path.join(parent, "cpuset.cpus")) and not _read(parent, "cpuset.cpus"):
        _write(parent, "cpuset.cpus", _read(hierarchy, "cpuset.cpus"))
        _write(parent, "cpuset.mems", _read(hierarchy, "cpuset.mems"))
    _remove_stale(parent)
    return parent


def _remove_stale(parent: str) -> None:
    """Cgroups of workers that died without removing theirs (an empty cgroup's folder can be removed)."""
    for name in os.listdir(parent):
        if not name.startswith("eval-"):
            continue
        try:
            owner = int(name.split("-")[1])
        except (IndexError, ValueError):
            continue
        if not os.path.exists(f"/proc/{owner}"):
            try:
                os.rmdir(os.path.join(parent, name))
            except OSError:
                pass


def _cpu_list(cores: set[int]) -> str:
    return ",".join(str(c) for c in sorted(cores))


def _read(folder: str, name: str) -> str:
    with open(os.path.join(folder, name)) as f:
        return f.read().strip()


def _write(folder: str, name: str, value: str) -> None:
    with open(os.path.join(folder, name), "w") as f:
        f.write(value)
