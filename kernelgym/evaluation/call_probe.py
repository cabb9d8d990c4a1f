"""Calls of chosen functions of a library by a process's threads, counted by the code that made each call,
measured from outside the process.

The trusted worker sets a uprobe (a perf event the kernel fires when a thread executes a function's first
instruction) on each function, for every thread of the target, and has the kernel copy the top of the user
stack into rings only the worker maps. At a function's entry the word at the stack pointer is the return
address: it lies in the code that made the call, and is attributed to the file mapped there. Nothing in the
target's Python can write these records, and no batch needs to look different to it.

The building block for evidence on a GPU that the solution's own code launched the work (docs/threat-model.md,
"What is still decided inside the candidate's process"): the judge's launch watch (launch_watch.py) opens
its uprobes with `open_uprobe` and reads them with `perf_records`; `CallProbe` itself counts calls by caller
for the measurements of benchmarks/judge_trust/launch_probe_gpu.py. Tested on the CPU with libraries of its
own (tests/evaluation/test_call_probe.py).

    probe = CallProbe(pid, "/usr/lib/x86_64-linux-gnu/libcuda.so.1", ["cuLaunchKernel", "cuLaunchKernelEx"])
    probe.start()                    # False: refused (the reason in `probe.refused`)
    ...                              # the target runs
    counts = probe.stop()            # counts.calls_by_caller: {caller's mapped file: calls}
"""

from __future__ import annotations

import atexit
import ctypes
import errno
import fcntl
import functools
import os
import platform
import struct
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from kernelgym.evaluation import perf_events as perf
from kernelgym.evaluation.ip_sampler import UNMAPPED, executable_mappings_at, thread_ids
from kernelgym.evaluation.symbols import symbols

PERF_SAMPLE_REGS_USER = 1 << 12
PERF_SAMPLE_STACK_USER = 1 << 13
PERF_TYPE_TRACEPOINT = 2
UPROBE_TYPE_FILE = "/sys/bus/event_source/devices/uprobe/type"
TRACEFS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
STACK_BYTES = 16  # the return address is the first word at the stack pointer; a little more costs nothing


@dataclass(frozen=True)
class CallCounts:
    available: bool
    reason: str = ""  # why not available, one line
    calls_by_caller: dict[str, int] = field(default_factory=dict)  # caller's mapped file -> calls
    calls_by_function: dict[str, int] = field(default_factory=dict)
    lost: int = 0  # calls the kernel dropped (a ring was full)
    threads_probed: tuple[int, ...] = ()

    @property
    def total(self) -> int:
        return sum(self.calls_by_function.values())


class CallProbe(perf.PerfEvents):
    """Counts calls of `functions` (names in `library`'s symbol table) by the threads `pid` has at start.

    A thread born while probing is not counted, and the events cannot follow it: a perf-PMU uprobe names its
    file by a pointer into the opener's memory, which the kernel reads again when an inherited copy is made,
    in the thread that clones, so an inherited uprobe makes the target's clone() fail (tried: "can't start
    new thread"). Following new threads needs uprobes defined through tracefs (uprobe_events), whose perf
    events are tracepoints and inherit; not done."""

    def __init__(self, pid: int, library: str, functions: Sequence[str], ring_pages: int = 16):
        super().__init__()
        self.pid, self.library, self.functions = pid, os.path.realpath(library), tuple(functions)
        self.ring_pages = ring_pages
        self._offsets: dict[str, int] = {}
        self._records: list[bytes] = []

    def start(self) -> bool:
        """Set the probes on every thread and enable them. False when refused (the reason in `refused`)."""
        return self._open_then_enable(self._open_threads)

    def _open_threads(self) -> None:
        table = symbols(self.library)
        self._offsets = table.file_offsets(self.functions) if table else {}
        if not self._offsets:
            raise perf.PerfUnavailable(f"none of {list(self.functions)} is a function of {self.library}")
        # A uprobe defined once in tracefs, opened as a tracepoint, closes at once; one made through the
        # uprobe PMU is unregistered at each close, ~88 ms apiece and serialized (launch_watch_cost.py).
        tracepoints = {o: uprobe_tracepoint(self.library, o) for o in self._offsets.values()}
        probe_type = PERF_TYPE_TRACEPOINT if all(tracepoints.values()) else uprobe_pmu_type()
        for tid in sorted(thread_ids(self.pid)):
            for offset in self._offsets.values():
                self._open(probe_type, tid, offset, tracepoints[offset])

    def _open(self, probe_type: int, tid: int, offset: int, tracepoint: int | None = None) -> None:
        fd = open_uprobe(probe_type, tid, self.library, offset, tracepoint)  # not inherited: see the class
        if fd is not None:
            self._rings.append(perf.Ring(tid, fd, self.ring_pages))

    def stop(self, close: bool = True) -> CallCounts:
        """Disable, read every record, attribute each call to its caller's file, and close (unless the
        caller closes later: closing uprobe events waits for the kernel, see EvaluationLaunchWatch.close)."""
        try:
            if self.refused:
                return CallCounts(available=False, reason=self.refused)
            for ring in self._rings:
                fcntl.ioctl(ring.fd, perf.PERF_EVENT_IOC_DISABLE, 0)
            records = b"".join(ring.take() for ring in self._rings)
            return self._counts(records)
        finally:
            if close or self.refused:
                self.close()

    def _counts(self, records: bytes) -> CallCounts:
        maps = executable_mappings_at(self.pid)
        by_offset = {offset: name for name, offset in self._offsets.items()}
        callers: Counter = Counter()
        functions: Counter = Counter()
        lost = 0
        for kind, body in perf_records(records):
            if kind == perf.PERF_RECORD_LOST:
                lost += struct.unpack_from("<Q", body, 8)[0]
            elif kind == perf.PERF_RECORD_SAMPLE:
                ip, _, _, size = struct.unpack_from("<QIIQ", body)
                returns_to = struct.unpack_from("<Q", body, 24)[0] if size >= 8 else None
                path, offset = place_of(ip, maps)
                functions[by_offset.get(offset, "?") if path == self.library else "?"] += 1
                callers[place_of(returns_to, maps)[0] if returns_to is not None else UNMAPPED] += 1
        return CallCounts(available=True, calls_by_caller=dict(callers), calls_by_function=dict(functions),
                          lost=lost, threads_probed=tuple(sorted({r.tid for r in self._rings})))



_defined: dict[tuple[str, int], int | None] = {}  # (library, offset) -> tracepoint id, this process's


@functools.cache  # found (or mounted) once per process; a refusal is not tried again for each probe
def _tracefs() -> str | None:
    """A mounted tracefs whose uprobe_events this process may write (mounted here as root if need be)."""
    for root in TRACEFS:
        if os.access(os.path.join(root, "uprobe_events"), os.W_OK):
            return root
    if os.geteuid() == 0 and os.path.isdir(TRACEFS[0]):
        mount = perf.libc.mount
        mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
        if mount(b"nodev", TRACEFS[0].encode(), b"tracefs", 0, None) == 0 and \
                os.access(os.path.join(TRACEFS[0], "uprobe_events"), os.W_OK):
            return TRACEFS[0]
    return None


def uprobe_tracepoint(library: str, offset: int) -> int | None:
    """The id of a uprobe event at `library`+`offset` defined in tracefs by this process (once), or None."""
    key = (library, offset)
    if key not in _defined:
        _defined[key] = None
        root = _tracefs()
        if root is not None:
            group = f"kernelgym_{os.getpid()}"
            name = f"p{len(_defined)}"
            try:
                _append(os.path.join(root, "uprobe_events"), f"p:{group}/{name} {library}:0x{offset:x}\n")
                with open(os.path.join(root, "events", group, name, "id")) as f:
                    _defined[key] = int(f.read())
                if len(_defined) == 1:
                    atexit.register(_remove_tracepoints, root, group)
            except (OSError, ValueError):
                pass
    return _defined[key]


def _append(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)  # tracefs refuses the seek of Python's append mode
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _remove_tracepoints(root: str, group: str) -> None:
    for number in range(1, len(_defined) + 1):
        try:
            _append(os.path.join(root, "uprobe_events"), f"-:{group}/p{number}\n")
        except OSError:
            pass


def uprobe_pmu_type() -> int:
    try:
        with open(UPROBE_TYPE_FILE) as f:
            return int(f.read())
    except (OSError, ValueError):
        raise perf.PerfUnavailable(
            f"no uprobe events on this kernel ({UPROBE_TYPE_FILE} unreadable)") from None


def open_uprobe(probe_type: int, tid: int, library: str, offset: int, tracepoint: int | None, *,
                sampling: bool = True, registers: tuple[int, ...] = (), stack_bytes: int = STACK_BYTES,
                inherit: bool = False) -> int | None:
    """One uprobe perf event at `library`+`offset` on thread `tid`, disabled. Sampling: every hit writes the
    IP, the thread, the user registers numbered in `registers` and the top `stack_bytes` of its stack into
    the event's ring. Counting (sampling=False): a count to read, inherited by the threads and processes
    born later where `inherit` (tracepoints only: see CallProbe). `tracepoint`: the id of a uprobe defined
    in tracefs (probe_type PERF_TYPE_TRACEPOINT), else the uprobe PMU names the file and offset itself.
    None when the thread exited since it was found; PerfUnavailable when the host refuses."""
    path = ctypes.create_string_buffer(library.encode())  # read by the kernel during the call only
    config, config1, config2 = ((tracepoint, 0, 0) if probe_type == PERF_TYPE_TRACEPOINT else
                                (0, ctypes.addressof(path), offset))
    attr = perf.PerfEventAttr(type=probe_type, size=ctypes.sizeof(perf.PerfEventAttr), config=config,
                              config1=config1, config2=config2)
    attr.flags = perf.ATTR_DISABLED | perf.ATTR_EXCLUDE_HV | perf.ATTR_EXCLUDE_KERNEL
    if sampling:
        attr.sample_period = 1
        attr.sample_type = perf.PERF_SAMPLE_IP | perf.PERF_SAMPLE_TID | PERF_SAMPLE_STACK_USER
        attr.sample_stack_user = stack_bytes
        if registers:
            attr.sample_type |= PERF_SAMPLE_REGS_USER
            attr.sample_regs_user = sum(1 << number for number in registers)
    if inherit:
        attr.flags |= perf.ATTR_INHERIT
    number = perf.SYSCALL_PERF_EVENT_OPEN.get(platform.machine())
    if number is None:
        raise perf.PerfUnavailable(f"perf_event_open: no syscall number known for {platform.machine()}")
    fd = perf.libc.syscall(number, ctypes.byref(attr), tid, -1, -1, perf.PERF_FLAG_FD_CLOEXEC)
    if fd < 0:
        err = ctypes.get_errno()
        if err == errno.ESRCH:  # the thread exited since the scan
            return None
        if err in perf.REFUSED | {errno.EINVAL}:
            raise perf.PerfUnavailable(perf.refusal_reason(err).replace("perf_event_open", "a uprobe"))
        raise OSError(err, os.strerror(err))
    return fd


def perf_records(data: bytes):
    """(type, body after the 8-byte header) of each perf record."""
    pos = 0
    while pos + 8 <= len(data):
        kind, _, size = struct.unpack_from("<IHH", data, pos)
        if size < 8:
            return
        yield kind, data[pos + 8:pos + size]
        pos += size


def place_of(address: int, maps: list[tuple[int, int, str, int]]) -> tuple[str, int]:
    """(mapped file, offset in it) of an address in one of the executable mappings, else UNMAPPED."""
    for start, end, path, file_offset in maps:
        if start <= address < end:
            return path, address - start + file_offset
    return UNMAPPED, -1
