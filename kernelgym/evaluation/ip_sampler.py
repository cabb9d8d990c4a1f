"""Where a process spent its CPU time, by shared library, measured from outside it.

The trusted worker samples the instruction pointers of every thread of a candidate process with a software
perf event (task-clock: a sample each `period_ns` of the thread's own CPU time), and attributes each sample to
the executable mapping of /proc/PID/maps that holds it. The share of samples inside the solution's own built
library is evidence that its own compiled code did the work, and nothing in the candidate's Python can write
it: the kernel takes the samples and writes them into ring buffers only the worker maps (issue 28).

Usage, around a region in which the target runs:

    sampler = IpSampler(pid)
    sampler.start()                  # opens one event per thread, enables them (False: refused)
    ...                              # the target runs
    samples = sampler.stop()         # disables, reads the rings and the maps, closes
    samples.share_in([built_so])     # fraction of the samples taken inside the built library

What it sees and what it does not:
- Threads are the ones in /proc/PID/task at start. Per-thread sampling of an existing process cannot use
  `inherit` (the kernel refuses to mmap a per-task event that is inherited), so a thread created after
  start is not sampled; the tasks are scanned again at stop and such threads are listed in
  `threads_unsampled`. A thread that appears and exits between the two scans is seen by neither: compare
  `cpu_ns_sampled_threads` with the process's (or its cgroup's) CPU time over the region to catch it.
- Only user-mode samples are taken by default (exclude_kernel: what perf_event_paranoid 2 allows without
  privilege, and kernel time is not the solution's code anyway); `cpu_ns_sampled_threads` counts all of it.
- Addresses are attributed with the maps read at stop (the caller can freeze the target first). New
  executable mappings made while sampling are listed in `exec_mappings_added`: those the kernel reports
  (PERF_RECORD_MMAP, made by a sampled thread) and any executable range that differs between the maps at
  start and at stop. Code remapped at the sampled addresses and back again within the region by a thread
  that is not sampled is not seen.
- When the host refuses perf events, `start` returns False and `stop` a result with `available` False and
  a one-line reason that names the permission; nothing is raised, so the verdict can quote it. A target
  that is gone raises ProcessLookupError: that is the caller's error, not the host's.
"""

from __future__ import annotations

import bisect
import ctypes
import errno
import fcntl
import os
import platform
import struct
from collections import Counter
from dataclasses import dataclass, field

from kernelgym.evaluation.perf_events import (
    ATTR_DISABLED,
    ATTR_EXCLUDE_HV,
    ATTR_EXCLUDE_KERNEL,
    ATTR_INHERIT,
    ATTR_MMAP,
    MISC_CPUMODE_MASK,
    MISC_KERNEL,
    PERF_COUNT_SW_TASK_CLOCK,
    PERF_EVENT_IOC_DISABLE,
    PERF_EVENT_IOC_ENABLE,
    PERF_FLAG_FD_CLOEXEC,
    PERF_RECORD_LOST,
    PERF_RECORD_MMAP,
    PERF_RECORD_SAMPLE,
    PERF_SAMPLE_IP,
    PERF_SAMPLE_TID,
    PERF_TYPE_SOFTWARE,
    REFUSED,
    SYSCALL_PERF_EVENT_OPEN,
    PerfEventAttr,
    PerfEvents,
    PerfUnavailable,
    Ring,
    libc,
    refusal_reason,
)

KERNEL = "[kernel]"  # a sample taken in kernel mode (only with exclude_kernel=False)
UNMAPPED = "[unmapped at stop]"  # no executable mapping held the address when the maps were read
ANON_EXEC = "[anon exec]"  # executable memory without a file (a JIT, or code written at run time)


@dataclass(frozen=True)
class IpSamples:
    """Samples of one region. Counts are samples (one per `period_ns` of a thread's user-mode CPU time)."""

    available: bool
    reason: str = ""  # why not available, one line naming the missing permission
    period_ns: int = 0
    samples_total: int = 0
    samples_by_path: dict[str, int] = field(default_factory=dict)  # mapping path (or a [label]) -> samples
    lost_records: int = 0  # PERF_RECORD_LOST records: a ring was full at times, then read (drain)
    samples_lost: int = 0  # the samples those records say were dropped
    # Rings found full when read: samples after that were dropped. The kernel writes the LOST record only
    # once there is room again, so a ring that fills before stop leaves no LOST record; this says so.
    rings_overflowed: int = 0
    threads_sampled: tuple[int, ...] = ()
    threads_unsampled: tuple[int, ...] = ()  # alive at stop but not at start: not sampled
    cpu_ns_sampled_threads: int = 0  # CPU time of the sampled threads while enabled (user and kernel)
    exec_mappings_added: tuple[str, ...] = ()  # paths of executable code mapped while sampling
    # path -> {offset in the file: samples}: where in a library they fell (for its symbols)
    offsets_by_path: dict[str, dict[int, int]] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Every sample of every thread alive at stop is here: nothing dropped, no thread left out. (A
        thread that came and went between start and stop shows only in the CPU time: see the module.)"""
        return (self.available and not self.lost_records and not self.rings_overflowed
                and not self.threads_unsampled)

    def share_in(self, paths) -> float:
        """Fraction of all samples taken inside the given files (compared by real path); 0 when none."""
        if not self.samples_total:
            return 0.0
        wanted = {os.path.realpath(p) for p in paths}
        inside = sum(n for path, n in self.samples_by_path.items() if path in wanted)
        return inside / self.samples_total


def unavailable(reason: str) -> IpSamples:
    return IpSamples(available=False, reason=reason)


# --- the task-clock event (evaluation/perf_events.py: the rest of perf_event_open) ----------------------

def _open_event(tid: int, period_ns: int, exclude_kernel: bool, cpu: int = -1) -> int:
    """A disabled task-clock sampling event on one thread, any CPU (cpu -1), or on one CPU and then
    inherited by every thread and process the thread makes (the kernel refuses to map an inherited event
    of any CPU). Raises OSError with the errno."""
    number = SYSCALL_PERF_EVENT_OPEN.get(platform.machine())
    if number is None:
        raise PerfUnavailable(f"perf_event_open: no syscall number known for {platform.machine()}")
    attr = PerfEventAttr(type=PERF_TYPE_SOFTWARE, size=ctypes.sizeof(PerfEventAttr),
                         config=PERF_COUNT_SW_TASK_CLOCK, sample_period=period_ns,
                         sample_type=PERF_SAMPLE_IP | PERF_SAMPLE_TID)
    attr.flags = ATTR_DISABLED | ATTR_EXCLUDE_HV | ATTR_MMAP
    if exclude_kernel:
        attr.flags |= ATTR_EXCLUDE_KERNEL
    if cpu >= 0:
        attr.flags |= ATTR_INHERIT
    fd = libc.syscall(number, ctypes.byref(attr), tid, cpu, -1, PERF_FLAG_FD_CLOEXEC)
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return fd


# --- the records --------------------------------------------------------------------------------------


@dataclass
class _Parsed:
    ips: Counter = field(default_factory=Counter)  # user-mode IP -> samples
    kernel_samples: int = 0
    lost_records: int = 0
    samples_lost: int = 0
    exec_mappings: list[str] = field(default_factory=list)


def _parse(records: bytes, into: _Parsed) -> None:
    """Walk perf records: each starts with a header (u32 type, u16 misc, u16 size)."""
    pos = 0
    while pos + 8 <= len(records):
        kind, misc, size = struct.unpack_from("<IHH", records, pos)
        if size < 8:  # a malformed record would loop forever; stop reading this ring
            break
        if kind == PERF_RECORD_SAMPLE:  # u64 ip, u32 pid, u32 tid
            (ip,) = struct.unpack_from("<Q", records, pos + 8)
            if misc & MISC_CPUMODE_MASK == MISC_KERNEL:
                into.kernel_samples += 1
            else:
                into.ips[ip] += 1
        elif kind == PERF_RECORD_LOST:  # u64 id, u64 lost
            into.lost_records += 1
            into.samples_lost += struct.unpack_from("<Q", records, pos + 16)[0]
        elif kind == PERF_RECORD_MMAP:  # u32 pid, u32 tid, u64 addr, len, pgoff, char filename[]
            name = records[pos + 40:pos + size].split(b"\0", 1)[0]
            into.exec_mappings.append(name.decode(errors="replace") or ANON_EXEC)
        pos += size


# --- attribution -----------------------------------------------------------------------------------------

def executable_mappings(pid: int) -> list[tuple[int, int, str]]:
    """(start, end, path) of every executable mapping of the process, sorted by start."""
    return [m[:3] for m in executable_mappings_at(pid)]


def executable_mappings_at(pid: int) -> list[tuple[int, int, str, int]]:
    """(start, end, path, offset in the file) of every executable mapping of the process, sorted by start."""
    found = []
    try:
        maps = open(f"/proc/{pid}/maps")  # noqa: SIM115 - closed by the with below; the open alone may fail
    except FileNotFoundError:
        raise ProcessLookupError(f"no process {pid} to sample") from None
    with maps:
        for line in maps:
            parts = line.split(maxsplit=5)
            if "x" not in parts[1]:
                continue
            start, end = (int(a, 16) for a in parts[0].split("-"))
            path = parts[5].strip() if len(parts) == 6 else ""
            found.append((start, end, path or ANON_EXEC, int(parts[2], 16)))
    return sorted(found)


def attribute(ips: Counter, mappings: list[tuple[int, int, str]]) -> dict[str, int]:
    """Samples per mapping path: each IP goes to the executable mapping that holds it."""
    starts = [m[0] for m in mappings]
    by_path: Counter = Counter()
    for ip, n in ips.items():
        i = bisect.bisect_right(starts, ip) - 1
        if i >= 0 and ip < mappings[i][1]:
            by_path[mappings[i][2]] += n
        else:
            by_path[UNMAPPED] += n
    return dict(by_path)


def file_offsets(ips: Counter, mappings: list[tuple[int, int, str, int]]) -> dict[str, dict[int, int]]:
    """Samples per (file, offset in it) for IPs inside file mappings."""
    starts = [m[0] for m in mappings]
    found: dict[str, Counter] = {}
    for ip, n in ips.items():
        i = bisect.bisect_right(starts, ip) - 1
        if i >= 0 and ip < mappings[i][1] and mappings[i][2].startswith("/"):
            start, _, path, pgoff = mappings[i]
            found.setdefault(path, Counter())[ip - start + pgoff] += n
    return {path: dict(c) for path, c in found.items()}


def _readable_maps(pid: int) -> list[tuple[int, int, str]]:
    try:
        return executable_mappings(pid)
    except PermissionError:
        raise PerfUnavailable(f"/proc/{pid}/maps unreadable (EACCES): attributing samples needs ptrace read "
                              f"access to the target (same user, or CAP_SYS_PTRACE)") from None


def thread_ids(pid: int) -> set[int]:
    try:
        return {int(t) for t in os.listdir(f"/proc/{pid}/task")}
    except FileNotFoundError:
        raise ProcessLookupError(f"no process {pid} to sample") from None


# --- the sampler -----------------------------------------------------------------------------------------

class IpSampler(PerfEvents):
    """Samples the user-mode IPs of every thread of `pid` between start() and stop().

    period_ns: CPU time between samples of one thread (100 µs: 10,000 samples per CPU-second).
    ring_pages: data pages per thread's ring (a power of two). Records are read at stop, so the ring must
    hold the region: 24 bytes a sample, 128 pages (512 KiB) hold about 2 s of one thread's CPU time; call
    drain() within longer regions (e.g. between batches). A full ring drops the rest of the region's
    samples of that thread (rings_overflowed; then `complete` is False and the shares are not evidence:
    code that fills the ring first would hide what runs after).
    Cost to the target: each sample is a timer interrupt. On the Firecracker VMs of CI (no PMU) one costs
    about 20 µs of the sampled thread's CPU time, so 100 µs slows it by ~25% and 1 ms by ~4%: sample every
    batch alike (or the reference too), never only some, or the timing is biased.
    """

    def __init__(self, pid: int, period_ns: int = 100_000, ring_pages: int = 128,
                 exclude_kernel: bool = True, cpus: tuple[int, ...] | None = None, vet=None):
        if ring_pages & (ring_pages - 1):
            raise ValueError("ring_pages must be a power of two")
        super().__init__()
        self.pid, self.period_ns, self.ring_pages = pid, period_ns, ring_pages
        # cpus: the only CPUs the target can run on (a cpuset it cannot leave). Then one event per thread
        # and CPU, inherited: threads born during the region are sampled too, those that exit included.
        self.cpus = tuple(cpus) if cpus else None
        self.exclude_kernel = exclude_kernel
        # (pid, maps, ips, files mapped executable meanwhile) -> maps relabelled (evaluation/own_images.py)
        self.vet = vet
        self._parsed = _Parsed()
        self._maps_at_start: set[tuple[int, int, str]] = set()
        self._counted: dict[int, int] = {}  # each event's count at the last pause

    def start(self) -> bool:
        """Open an event on every thread, read the maps, then enable the events together. False when the
        host refuses (the reason in `refused`; stop() then returns the unavailable result); a target that is
        gone raises ProcessLookupError."""
        if not self._open_then_enable(self._open_threads):
            return False
        if not self._rings:
            raise ProcessLookupError(f"process {self.pid} exited before any of its threads could be sampled")
        return True

    def _open_threads(self) -> None:
        seen: set[int] = set()
        # Threads can be born while the events are opened: scan until a scan finds nothing new.
        for _ in range(1 if self.cpus else 3):  # inherited events see the later ones anyway
            new = thread_ids(self.pid) - seen
            if not new:
                break
            seen |= new
            self._open_all(sorted(new))
        # The maps before any event runs: what is executable at stop and was not here now is listed.
        self._maps_at_start = set(_readable_maps(self.pid))

    def _open_all(self, tids: list[int]) -> None:
        for tid, cpu in ((t, c) for t in tids for c in (self.cpus or (-1,))):
            try:
                fd = _open_event(tid, self.period_ns, self.exclude_kernel, cpu)
            except OSError as e:
                if e.errno == errno.ESRCH:  # the thread exited since the scan: nothing to sample
                    continue
                if e.errno in REFUSED:
                    raise PerfUnavailable(refusal_reason(e.errno)) from None
                raise
            try:
                ring = Ring(tid, fd, self.ring_pages)
            except OSError as e:  # mmap beyond perf_event_mlock_kb without CAP_IPC_LOCK
                os.close(fd)
                raise PerfUnavailable(f"perf ring buffer refused ({errno.errorcode.get(e.errno)}): "
                                      f"perf_event_mlock_kb or RLIMIT_MEMLOCK too small, "
                                      f"or CAP_IPC_LOCK missing") from None
            self._rings.append(ring)

    def drain(self) -> None:
        """Read the records so far into the sampler's tallies, freeing ring space (safe while sampling)."""
        for ring in self._rings:
            _parse(ring.take(), self._parsed)

    def stop(self) -> IpSamples:
        """Disable, read everything, attribute the IPs with the maps as they are now, and close."""
        try:
            return self.pause()
        finally:
            self.close()

    def pause(self, attribute_samples: bool = True) -> IpSamples:
        """Disable and read the region so far, keeping the events open: resume() starts the next region at
        the cost of an ioctl per event (opening and mapping them again costs milliseconds). Without
        `attribute_samples` the maps are not read and the result holds the counts only."""
        if self.refused:
            return unavailable(self.refused)
        for ring in self._rings:
            fcntl.ioctl(ring.fd, PERF_EVENT_IOC_DISABLE, 0)
        self.drain()
        counts = {id(ring): ring.cpu_ns() for ring in self._rings}
        cpu_ns = sum(counts[id(r)] - self._counted.get(id(r), 0) for r in self._rings)
        self._counted = counts
        overflowed = sum(ring.overflowed for ring in self._rings)
        sampled = {ring.tid for ring in self._rings}
        parsed, self._parsed = self._parsed, _Parsed()
        for ring in self._rings:
            ring.overflowed = False
        by_path: dict[str, int] = {}
        offsets: dict[str, dict[int, int]] = {}
        added: tuple[str, ...] = ()
        unsampled: tuple[int, ...] = ()
        if attribute_samples:
            if not self.cpus:
                unsampled = tuple(sorted(thread_ids(self.pid) - sampled))
            maps_at = executable_mappings_at(self.pid)
            maps = [m[:3] for m in maps_at]
            if self.vet is not None:
                maps_at = self.vet(self.pid, maps_at, parsed.ips, parsed.exec_mappings)
            by_path = attribute(parsed.ips, [m[:3] for m in maps_at])
            offsets = file_offsets(parsed.ips, maps_at)
            added = self._added(maps, parsed)
            self._maps_at_start = set(maps)
        elif parsed.ips:
            by_path[UNMAPPED] = sum(parsed.ips.values())
        if parsed.kernel_samples:
            by_path[KERNEL] = parsed.kernel_samples
        return IpSamples(
            available=True, period_ns=self.period_ns, samples_total=sum(by_path.values()),
            samples_by_path=by_path, lost_records=parsed.lost_records, samples_lost=parsed.samples_lost,
            rings_overflowed=overflowed, threads_sampled=tuple(sorted(sampled)), threads_unsampled=unsampled,
            cpu_ns_sampled_threads=cpu_ns, exec_mappings_added=added, offsets_by_path=offsets)

    def resume(self) -> None:
        """Start the next region: threads born since are opened first (with inherited events they are
        already covered, and the maps' baseline is the last pause's)."""
        if not self.cpus:
            new = thread_ids(self.pid) - {ring.tid for ring in self._rings}
            self._open_all(sorted(new))
        for ring in self._rings:
            fcntl.ioctl(ring.fd, PERF_EVENT_IOC_ENABLE, 0)

    def _added(self, maps_at_stop: list[tuple[int, int, str]], parsed: _Parsed) -> tuple[str, ...]:
        """Executable code that was not there at start: what the kernel reported being mapped by a sampled
        thread (PERF_RECORD_MMAP), and any executable range at stop that differs from the maps at start
        (mapped by a thread that was not sampled)."""
        changed = {path for path_range in set(maps_at_stop) - self._maps_at_start for path in path_range[2:]}
        return tuple(sorted(changed | set(parsed.exec_mappings)))
