"""A forked evaluation process, seen from the trusted worker: start, talk, freeze, read, time out, kill.
(Its own side of the fork is workers/process_start.py; the /proc reads workers/procfs.py.)

The worker observes the candidate from outside: it freezes its whole process tree (SIGSTOP), reads its
memory through /proc (the candidate cannot choose what the worker sees, only where its outputs are), and
reads the CPU time the kernel accounted to the tree.
"""

from __future__ import annotations

import os
import signal
import socket
import time

from kernelgym.workers import messages as m
from kernelgym.workers import protocol
from kernelgym.workers.candidate_side import run_candidate
from kernelgym.workers.child import ChildJob
from kernelgym.workers.process_start import child_main
from kernelgym.workers.procfs import (
    allowed_cpus,
    children_of,
    dead_or_dying,
    off_run_queue,
    send_signal,
    stat_fields,
    threads_of,
)
from kernelgym.workers.sandbox import SandboxConfig

OUTPUT_TAIL_BYTES = 4000
_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


class EvalProcess:
    """One forked evaluation process (reference or candidate) and the trusted side's end of its socket.
    Forked without a job (a spare), it enters its sandbox, makes its CUDA context and waits for `assign`."""

    def __init__(self, target, job: ChildJob | None, eval_dir: str, sandbox: SandboxConfig, uses_gpu: bool,
                 cores: set[int] | None = None, cgroup_files: list[str] | None = None):
        self.log_path = os.path.join(eval_dir, "output.log")
        self.candidate = target is run_candidate
        parent_sock, child_sock = socket.socketpair()
        log_fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        pid = os.fork()
        if pid == 0:  # the evaluation process
            parent_sock.close()
            child_main(target, job, child_sock, eval_dir, log_fd, sandbox, uses_gpu, cores, self.candidate,
                        cgroup_files)
        os.close(log_fd)
        child_sock.close()
        # the forked process; with a PID namespace, the parent of the namespace's first process
        self.pid = pid
        self.main_pid = pid  # the process that runs the evaluation (learned from Hello)
        self.sock = parent_sock
        self.status: int | None = None
        self.frozen: list[int] = []
        self.helpers: set[int] = set()
        self.settle_blind = False  # /proc/TID/wchan never showed a stopped thread off its run queue
        self._mem_fd: int | None = None

    # talking --------------------------------------------------------------------------------------------
    def receive(self, deadline: float) -> tuple[m.Message, list[bytearray], list[int]]:
        blobs = 0 if self.candidate else protocol.MAX_BLOB_BYTES  # a candidate sends none
        try:  # the whole message by the deadline (TimeoutError once it has passed)
            return m.receive(self.sock, deadline, max_blob_bytes=blobs)
        except TimeoutError:
            raise TimeoutError from None
        except (protocol.ProtocolError, OSError) as exc:
            raise Died(str(exc)) from None

    def assign(self, job: ChildJob) -> None:
        """A spare's job (a spare reads it once it has said Hello and made its CUDA context)."""
        import pickle

        self.send(m.Job(), blobs=[pickle.dumps(job)])

    def send(self, message: m.Message, blobs=(), fds=()) -> None:
        try:
            m.send(self.sock, message, blobs, fds)
        except OSError as exc:
            raise Died(str(exc)) from None

    def hello(self, deadline: float) -> m.Hello:
        msg, _, _ = self.receive(deadline)
        if not isinstance(msg, m.Hello):
            raise Died(f"expected hello, got {msg.kind}")
        claimed = int(getattr(msg, "pid", 0) or 0)
        # The candidate says which process it is; believe it only if that process is ours.
        if claimed and claimed != self.pid and claimed in self.tree():
            self.main_pid = claimed
            parent = stat_fields(claimed)
            # the PID namespace's two helpers (they only wait, and are not dumpable): not candidate code
            self.helpers = {self.pid, int(parent[1])} if parent else {self.pid}
        return msg

    # observing from outside -------------------------------------------------------------------------------
    def tree(self) -> list[int]:
        """Every live process of this evaluation: the forked one and its descendants. Nothing leaves by being
        orphaned: orphans are adopted by a descendant (the PID namespace's first process, or the keeper)."""
        members, todo = [], [self.pid]
        while todo:
            pid = todo.pop()
            if stat_fields(pid) is None:
                continue
            members.append(pid)
            todo += children_of(pid)
        return sorted(members)

    def group_members(self) -> list[int]:
        """Processes still in the evaluation's process group or session (a full scan: used when ending)."""
        found = []
        for name in os.listdir("/proc"):
            fields = stat_fields(int(name)) if name.isdigit() else None
            if fields and {self.pid, self.main_pid} & {int(fields[2]), int(fields[3])}:
                found.append(int(name))
        return found

    def freeze(self) -> None:
        """SIGSTOP the whole tree (again until no new process appears), then wait briefly for the stops to
        land. A thread that is runnable but not scheduled can keep its stop pending for seconds on a busy
        machine (measured here: 2 s and more); it cannot run user code before it stops, which is what
        `on_cpu_ns` lets the caller verify."""
        seen: set[int] = set()
        for _ in range(4):
            new = [p for p in self.tree() if p not in seen]
            if not new:
                break
            for pid in new:
                send_signal(pid, signal.SIGSTOP)
            seen.update(new)
        self.frozen = sorted(seen)
        self.wait_stopped(0.2)

    def wait_stopped(self, limit_s: float) -> bool:
        """Wait until every thread of the candidate's processes is stopped (the helpers only wait)."""
        running = [tid for pid in self.frozen if pid not in self.helpers for tid in threads_of(pid)]
        end = time.monotonic() + limit_s
        while running and time.monotonic() < end:
            running = [tid for tid in running if (stat_fields(tid) or ["X"])[0] not in ("T", "t", "Z", "X")]
            if running:
                time.sleep(0.0002)
        return not running

    def settle(self, limit_s: float) -> bool:
        """Wait until every thread of the frozen tree, the helpers' included, is off its CPU's run queue: its
        stop has landed and the kernel has charged it for all it ran. A thread is charged when it is switched
        out, and /proc shows it stopped a moment before that; a count read in that moment is short of the
        thread's last slice, which the kernel then charges as if it ran while stopped (an honest ReLU read
        so under load: 3.9 ms, over the 2 ms allowed). io_uring's workers never stop: their time is the
        count's to catch. False when `limit_s` passed first (the count is then read as before)."""
        if self.settle_blind:
            return False
        pending = [tid for pid in self.frozen for tid in threads_of(pid)]
        end = time.monotonic() + limit_s
        while pending:
            states = [(tid, off_run_queue(tid)) for tid in pending]
            pending = [tid for tid, (off, _) in states if not off]
            if pending and time.monotonic() >= end:
                # stopped for so long but never off the queue: this kernel does not tell (no wchan)
                self.settle_blind = all(stopped for tid, (off, stopped) in states if not off)
                return False
            if pending:
                time.sleep(0.0002)
        return True

    def alive(self) -> bool:
        return not dead_or_dying(self.main_pid)

    def on_cpu_ns(self) -> dict[int, int]:
        """Each candidate thread's time on a CPU so far, in ns (/proc/TID/schedstat, exact to this moment):
        unchanged across a read means no thread ran while it was made."""
        spent: dict[int, int] = {}
        for pid in self.tree():
            if pid in self.helpers:
                continue
            for tid in threads_of(pid):
                try:
                    with open(f"/proc/{tid}/schedstat") as f:
                        spent[tid] = int(f.read().split()[0])
                except (OSError, ValueError, IndexError):
                    spent[tid] = -1
        return spent

    def thaw(self) -> None:
        for pid in self.frozen:
            send_signal(pid, signal.SIGCONT)
        self.frozen = []
        if self._mem_fd is not None:  # opened again next batch: after an exec it would read the old image
            os.close(self._mem_fd)
            self._mem_fd = None

    def cpu_seconds(self) -> float:
        """CPU time the kernel accounted to the tree, exited threads and reaped children included."""
        total = 0
        for pid in self.tree():
            fields = stat_fields(pid)
            if fields:
                total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        return total / _TICKS

    def cpus_seen(self) -> set[int]:
        """Every CPU a thread of the tree may run on or last ran on, as the kernel records it."""
        seen: set[int] = set()
        for pid in self.tree():
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                fields = stat_fields(int(tid)) or []
                if len(fields) > 36:
                    seen.add(int(fields[36]))  # the CPU it last ran on
                seen |= allowed_cpus(pid, tid)
        return seen

    def read_into(self, address: int, target: memoryview) -> None:
        """Fill `target` from the candidate's memory at `address`, read by this (trusted) process: it sees
        what is really there (OSError if any of it is not mapped)."""
        if self._mem_fd is None:
            self._mem_fd = os.open(f"/proc/{self.main_pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
        done = 0
        while done < len(target):
            got = os.preadv(self._mem_fd, [target[done:]], address + done)
            if got <= 0:
                raise OSError(f"read {done} of {len(target)} bytes")
            done += got

    def written_pages(self, ranges: list[tuple[int, int]]) -> int:
        """Pages of these copy-on-write file mappings that the candidate wrote, from the kernel's page tables
        (/proc/PID/pagemap): a written page became private (present, not file-backed) or was swapped out;
        a page only read stays the file's."""
        import numpy as np

        written = 0
        with open(f"/proc/{self.main_pid}/pagemap", "rb", buffering=0) as f:
            for lo, hi in ranges:
                f.seek(lo // _PAGE * 8)
                entries = np.frombuffer(f.read((hi - lo) // _PAGE * 8), dtype=np.uint64)
                present, swapped, file_page = (entries >> 63) & 1, (entries >> 62) & 1, (entries >> 61) & 1
                written += int(np.count_nonzero(swapped | (present & (file_page ^ 1))))
        return written

    def mappings_of(self, marker: str) -> list[tuple[int, int, str, int]]:
        """(start, end, permissions, inode) of each mapping whose name contains `marker` (the input arena)."""
        found = []
        with open(f"/proc/{self.main_pid}/maps") as f:
            for line in f:
                if marker in line:
                    span, perms, _, _, inode = line.split()[:5]
                    lo, hi = span.split("-")
                    found.append((int(lo, 16), int(hi, 16), perms, int(inode)))
        return found

    # ending -----------------------------------------------------------------------------------------------
    def kill(self) -> None:
        """SIGKILL the candidate's processes and let the helpers, which only wait, reap them and end: a helper
        killed with them would hand its unreaped children to init, as zombies nobody reaps."""
        for pid in self.tree():
            if pid not in self.helpers:
                send_signal(pid, signal.SIGKILL)
        for pid in self.helpers:
            send_signal(pid, signal.SIGCONT)  # a frozen helper reaps nothing
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.wait()

    def wait(self, timeout: float = 5.0) -> int | None:
        if self.status is not None:
            return self.status
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = status
                return status
            time.sleep(0.005)
        send_signal(self.pid, signal.SIGKILL)
        _, self.status = os.waitpid(self.pid, 0)
        return self.status

    def close(self) -> None:
        self.sock.close()
        if self._mem_fd is not None:
            os.close(self._mem_fd)
            self._mem_fd = None
        self.thaw()
        leftovers = (set(self.tree()) | set(self.group_members())) - self.helpers
        for pid in leftovers:  # anything the candidate left running, whatever group or session it chose
            send_signal(pid, signal.SIGKILL)
        if self.status is None:
            self.kill()

    def output_tail(self) -> str:
        try:
            size = os.path.getsize(self.log_path)
            with open(self.log_path, "rb") as f:
                if size <= OUTPUT_TAIL_BYTES:
                    return f.read().decode("utf-8", "replace")
                head = f.read(OUTPUT_TAIL_BYTES // 2).decode("utf-8", "replace")
                f.seek(size - OUTPUT_TAIL_BYTES // 2)
                tail = f.read().decode("utf-8", "replace")
            return f"{head}\n... [{size - OUTPUT_TAIL_BYTES} bytes of output cut] ...\n{tail}"
        except OSError:
            return ""

    def death(self) -> str:
        status = self.wait()
        if status is None:
            return "the process vanished"
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            named = sig in signal.valid_signals()
            return f"killed by signal {signal.Signals(sig).name}" if named else f"signal {sig}"
        return f"exited with status {os.WEXITSTATUS(status)}"


class Died(Exception):
    """The process hung up or exited: the caller reads `death()` for how."""


