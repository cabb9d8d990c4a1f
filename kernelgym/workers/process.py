"""A forked evaluation process, seen from the trusted worker: start, talk, freeze, read, time out, kill.

The worker observes the candidate from outside: it freezes its whole process tree (SIGSTOP), reads its
memory through /proc (the candidate cannot choose what the worker sees, only where its outputs are), and
reads the CPU time the kernel accounted to the tree.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import time
import warnings

from kernelgym.workers import messages as m
from kernelgym.workers import protocol
from kernelgym.workers.candidate_side import run_candidate
from kernelgym.workers.child import ChildJob
from kernelgym.workers.sandbox import SandboxConfig, enter, enter_namespaces, no_inspection

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
            _child_main(target, job, child_sock, eval_dir, log_fd, sandbox, uses_gpu, cores, self.candidate,
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
            parent = _stat_fields(claimed)
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
            if _stat_fields(pid) is None:
                continue
            members.append(pid)
            todo += _children_of(pid)
        return sorted(members)

    def group_members(self) -> list[int]:
        """Processes still in the evaluation's process group or session (a full scan: used when ending)."""
        found = []
        for name in os.listdir("/proc"):
            fields = _stat_fields(int(name)) if name.isdigit() else None
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
                _signal(pid, signal.SIGSTOP)
            seen.update(new)
        self.frozen = sorted(seen)
        self.wait_stopped(0.2)

    def wait_stopped(self, limit_s: float) -> bool:
        """Wait until every thread of the candidate's processes is stopped (the helpers only wait)."""
        running = [tid for pid in self.frozen if pid not in self.helpers for tid in threads_of(pid)]
        end = time.monotonic() + limit_s
        while running and time.monotonic() < end:
            running = [tid for tid in running if (_stat_fields(tid) or ["X"])[0] not in ("T", "t", "Z", "X")]
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
            states = [(tid, _off_run_queue(tid)) for tid in pending]
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
            _signal(pid, signal.SIGCONT)
        self.frozen = []
        if self._mem_fd is not None:  # opened again next batch: after an exec it would read the old image
            os.close(self._mem_fd)
            self._mem_fd = None

    def cpu_seconds(self) -> float:
        """CPU time the kernel accounted to the tree, exited threads and reaped children included."""
        total = 0
        for pid in self.tree():
            fields = _stat_fields(pid)
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
                fields = _stat_fields(int(tid)) or []
                if len(fields) > 36:
                    seen.add(int(fields[36]))  # the CPU it last ran on
                seen |= _allowed_cpus(pid, tid)
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
                _signal(pid, signal.SIGKILL)
        for pid in self.helpers:
            _signal(pid, signal.SIGCONT)  # a frozen helper reaps nothing
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
        _signal(self.pid, signal.SIGKILL)
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
            _signal(pid, signal.SIGKILL)
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


def _child_main(target, job, sock, eval_dir, log_fd, sandbox, uses_gpu, cores, candidate,
                cgroup_files=None) -> None:
    code = 0
    try:
        _die_with_parent()
        if cgroup_files:  # first: every thread and process the candidate makes is born inside its cgroup
            from kernelgym.workers import cgroup

            try:
                cgroup.join(cgroup_files)
            except OSError:  # the worker finds the cgroup empty and falls back, saying so
                pass
        _keep_only_fds(sock.fileno(), log_fd)
        if cores:  # the candidate gets exactly the reference's cores: extra threads only share them
            os.sched_setaffinity(0, cores)
        _steady_allocator()
        notes: list[str] = []
        pid_ns = False
        if candidate:
            notes, pid_ns = enter_namespaces(sandbox, uses_gpu)
            if pid_ns:
                _become_namespace_init()
            else:
                _become_keeper()
        pid = _global_pid()  # before /proc is remounted for a PID namespace
        notes += enter(eval_dir, log_fd, sandbox, uses_gpu, candidate=candidate, own_pids=pid_ns)
        if uses_gpu:
            quiet_sandbox_warnings()
        m.send(sock, m.Hello(notes, pid=pid))
        if job is None:
            job = _await_job(sock, uses_gpu)
        if candidate:
            run_candidate(job, sock, eval_dir)
        else:
            target(job, sock)
    except BaseException:  # noqa: BLE001 - any end of the evaluation process is an exit status
        code = 70
    finally:
        os._exit(code)


def _await_job(sock, uses_gpu: bool) -> ChildJob:
    """A spare's wait: the CUDA context (and cuBLAS's handle) first, the part of a GPU process's start that
    costs about half a second, then the job. Nothing of the solution's has run in this process yet."""
    import pickle

    if uses_gpu:
        import torch

        torch.empty(1, device="cuda")
        torch.cuda.current_blas_handle()
    msg, blobs, _ = m.receive(sock)
    if not isinstance(msg, m.Job) or len(blobs) != 1:
        raise SystemExit(70)
    return pickle.loads(bytes(blobs[0]))


def quiet_sandbox_warnings() -> None:
    """NVML does not start inside the sandbox's namespaces on some hosts, and torch warns about it at every
    device count: the sandbox's doing, not the solution's, so it stays out of the output shown as feedback.
    (torch then counts devices through the CUDA runtime, which works.)"""
    warnings.filterwarnings("ignore", message="Can't initialize NVML")


def _die_with_parent() -> None:
    """SIGKILL from the kernel when the parent dies: an evaluation frozen when its worker was killed would
    otherwise stay stopped for good (seen after a fault-injection soak: 15 stopped processes, 240 MB each)."""
    import ctypes

    parent = os.getppid()
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent was already gone
        os._exit(70)


def _keep_only_fds(*keep: int) -> None:
    """Close every descriptor inherited from the worker but these (and stdio): the fork copied the worker's
    ends of the other process's socket, its pool connection and its readback buffer, none of which an
    evaluation process may hold (close-on-exec does nothing at a fork)."""
    last = 2
    for fd in sorted(set(keep)):
        os.closerange(last + 1, fd)
        last = fd
    os.closerange(last + 1, os.sysconf("SC_OPEN_MAX"))


def _steady_allocator() -> None:
    """The same malloc policy on both sides, fixed: freed memory stays in the heap for the next batch's
    outputs. glibc's default moves its mmap threshold as the process frees, so whether a call's output lands
    on fresh pages (and pays their faults, as much as a memory-bound kernel's own time) depended on each
    process's history: the bundled ReLU measured 0.45x-1.33x over 8 evaluations before, 0.86x-0.92x over 6
    after."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD: glibc's maximum, and no longer adjusted
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD: keep freed heap memory
    except (OSError, AttributeError):  # not glibc: its own policy applies to both sides alike
        pass


def _become_namespace_init() -> None:
    """After unshare(CLONE_NEWPID): fork the namespace's first process, which forks the candidate (pid 2
    there) and reaps orphans; this process waits for it and passes on how the candidate ended. When the first
    process dies, the kernel kills everything else in the namespace.

    The candidate is not the namespace's first process itself: that one is immune to the signals it sends
    itself without a handler (raise, abort), so a candidate there could not end the way an ordinary process
    does. Both helpers are undumpable and never run candidate code."""
    read_end, write_end = os.pipe()
    first = os.fork()
    if first == 0:  # pid 1 of the namespace
        _die_with_parent()  # its end ends the namespace: nothing frozen in it outlives a killed worker
        os.close(read_end)
        no_inspection()
        candidate = os.fork()
        if candidate == 0:
            os.close(write_end)
            return
        _close_all_but(write_end)
        os.write(write_end, struct.pack("i", _reap_until(candidate)))
        os._exit(0)
    os.close(write_end)
    no_inspection()
    _close_all_but(read_end)  # keep no socket open: the trusted side must see the evaluation's end
    _, status = os.waitpid(first, 0)
    told = os.read(read_end, 4)
    _end_like(struct.unpack("i", told)[0] if len(told) == 4 else status)


def _become_keeper() -> None:
    """Without a PID namespace (a GPU, a user without root): make this process a child subreaper and fork
    the candidate from it. A process the candidate orphans (a double fork, a daemon) is then adopted here,
    inside the evaluation's tree, instead of by init outside it: frozen with the candidate, its CPU time
    counted, killed at the end. Measured before this: such a daemon spun on the reference's core whenever
    the candidate was frozen (the reference timed at 1.62 ms a call against 0.58-0.61 ms) and outlived the
    evaluation.

    The candidate cannot undo it (the flag belongs to this process, which never runs candidate code); it
    could still leave the tree another way as root in the worker's PID namespace (documented)."""
    import ctypes

    ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    candidate = os.fork()
    if candidate == 0:
        _die_with_parent()
        return
    no_inspection()
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # no socket kept: the trusted side must see the end
    status = _reap_until(candidate)
    _kill_adopted()
    _end_like(status)


PR_SET_CHILD_SUBREAPER = 36


def _kill_adopted() -> None:
    """Kill and reap every child left (what the candidate orphaned), until none is: exiting with them alive
    would hand them to init, out of the trusted side's reach."""
    while True:
        for pid in _children_of(os.getpid()):
            _signal(pid, signal.SIGKILL)
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _children_of(pid: int) -> list[int]:
    found = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return found


def _close_all_but(fd: int) -> None:
    os.closerange(3, fd)
    os.closerange(fd + 1, os.sysconf("SC_OPEN_MAX"))


def _reap_until(pid: int) -> int:
    """Wait for every child (orphans are adopted here) until `pid` ends; its wait status."""
    while True:
        try:
            ended, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 0
        if ended == pid:
            return status


def _end_like(status: int) -> None:
    """End this process the way the candidate ended, so the worker reads the real cause (SIGSEGV...)."""
    if os.WIFSIGNALED(status):
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


def _global_pid() -> int:
    """This process's pid as the worker sees it (the first NSpid entry, read before /proc is remounted)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return os.getpid()


PF_EXITING = 0x4  # the task's flags (include/linux/sched.h): it has begun to exit
PF_IO_WORKER = 0x10  # an io_uring worker thread: it ignores SIGSTOP
SIGKILL_BIT = 1 << (signal.SIGKILL - 1)


def dead_or_dying(pid: int) -> bool:
    """Gone, a zombie, exiting, or with SIGKILL pending. A killed process loses its memory map before it
    becomes a zombie: what a reader finds in that window (no mappings, unreadable memory) is its death, not
    something it did."""
    fields = _stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X") or int(fields[6]) & PF_EXITING:
        return True
    try:
        with open(f"/proc/{pid}/status") as f:
            pending = [int(line.split()[1], 16) for line in f if line.startswith(("SigPnd:", "ShdPnd:"))]
    except (OSError, ValueError, IndexError):
        return True
    return any(mask & SIGKILL_BIT for mask in pending)


def _off_run_queue(tid: int) -> tuple[bool, bool]:
    """(off its run queue or gone, stopped per its state). The kernel names a thread's wait channel only
    while it is blocked and dequeued (get_wchan: not running, not on a run queue), which is after it was
    charged for its last slice. An io_uring worker never stops: nothing to wait for."""
    fields = _stat_fields(tid)
    if fields is None or fields[0] in ("Z", "X") or int(fields[6]) & PF_IO_WORKER:
        return True, True
    try:
        with open(f"/proc/{tid}/wchan") as f:
            return f.read().strip() not in ("", "0"), fields[0] in ("T", "t")
    except OSError:
        return True, True


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name: state, ppid, pgrp, ... (None if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("ascii", "replace")
    except OSError:
        return None
    return data[data.rfind(")") + 2:].split()


def pin_threads(members, cores: set[int]) -> bool:
    """Every thread of the processes `members()` names onto `cores`, pass after pass until one finds no
    thread it has not pinned (a thread made meanwhile by one not yet pinned inherits the old cores). False
    where the kernel refuses (another user's process without CAP_SYS_NICE)."""
    pinned: set[int] = set()
    for _ in range(5):
        tids = {tid for pid in members() for tid in threads_of(pid)}
        if tids <= pinned:
            return True
        for tid in tids - pinned:
            try:
                os.sched_setaffinity(tid, cores)
            except ProcessLookupError:  # exited meanwhile
                pass
            except OSError:
                return False
        pinned |= tids
    return False


def threads_of(pid: int) -> list[int]:
    try:
        return [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def _allowed_cpus(pid: int, tid: str) -> set[int]:
    try:
        with open(f"/proc/{pid}/task/{tid}/status") as f:
            line = next((ln for ln in f if ln.startswith("Cpus_allowed_list:")), "")
    except OSError:
        return set()
    cpus: set[int] = set()
    for part in line.split(":", 1)[-1].strip().split(","):
        if "-" in part:
            lo, hi = part.split("-")
            cpus |= set(range(int(lo), int(hi) + 1))
        elif part:
            cpus.add(int(part))
    return cpus


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
