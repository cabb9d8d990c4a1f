"""What /proc says about a process and its threads, read by the trusted worker from outside: state, children,
threads, cores, pending signals, wait channels. Also the signals and the pinning the worker applies to them
(an evaluation process can neither hide from these reads nor choose what they find)."""

from __future__ import annotations

import os
import signal


def children_of(pid: int) -> list[int]:
    found = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return found


PF_EXITING = 0x4  # the task's flags (include/linux/sched.h): it has begun to exit


PF_IO_WORKER = 0x10  # an io_uring worker thread: it ignores SIGSTOP


SIGKILL_BIT = 1 << (signal.SIGKILL - 1)


def dead_or_dying(pid: int) -> bool:
    """Gone, a zombie, exiting, or with SIGKILL pending. A killed process loses its memory map before it
    becomes a zombie: what a reader finds in that window (no mappings, unreadable memory) is its death, not
    something it did."""
    fields = stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X") or int(fields[6]) & PF_EXITING:
        return True
    try:
        with open(f"/proc/{pid}/status") as f:
            pending = [int(line.split()[1], 16) for line in f if line.startswith(("SigPnd:", "ShdPnd:"))]
    except (OSError, ValueError, IndexError):
        return True
    return any(mask & SIGKILL_BIT for mask in pending)


def off_run_queue(tid: int) -> tuple[bool, bool]:
    """(off its run queue or gone, stopped per its state). The kernel names a thread's wait channel only
    while it is blocked and dequeued (get_wchan: not running, not on a run queue), which is after it was
    charged for its last slice. An io_uring worker never stops: nothing to wait for."""
    fields = stat_fields(tid)
    if fields is None or fields[0] in ("Z", "X") or int(fields[6]) & PF_IO_WORKER:
        return True, True
    try:
        with open(f"/proc/{tid}/wchan") as f:
            return f.read().strip() not in ("", "0"), fields[0] in ("T", "t")
    except OSError:
        return True, True


def stat_fields(pid: int) -> list[str] | None:
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


def allowed_cpus(pid: int, tid: str) -> set[int]:
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


def send_signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def line_value(path: str, prefix: str) -> str | None:
    """The first value on the first line of the /proc file `path` that starts with `prefix`; None where the
    file is unreadable or has no such line."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(prefix):
                    return line.split()[1]
    except OSError:
        pass
    return None
