"""Every kernel launch of the candidate, watched by the worker from the candidate's construction to its end,
taken batch by batch: the evidence `gpu_evidence.judge` decides on.

It replaces a watch of one profiled batch (launches.LaunchWatch, retired), on the threads the candidate had
when it started, that kept counts by caller. This watch differs where the GPU cheats of tests/adversarial
went through that one:

- it runs for the whole evaluation, the same in every batch: a uprobe is a breakpoint byte the candidate can
  read in its own memory (cuda_uprobe_breakpoint_aware_passthrough.py), so a batch watched alone is a batch
  it can tell apart;
- each launch's registers and the top of its stack are copied by the kernel (PERF_SAMPLE_REGS_USER and
  STACK_USER): the return address (the caller's file), the kernel launched (a runtime launch's `func` is its
  host stub: the file and symbol that define it, cuda_launches_laundered_through_got.py) and its grid and
  block (threads launched, a size the candidate's own kernels must match);
- every thread of every process of the candidate's tree is probed, and new ones at each take; where the
  uprobes are tracefs tracepoints, an inherited counting event on each thread also counts the launches of
  threads and processes born since, which the sampled ones must account for
  (triton_cublas_in_thread_born_per_call.py, triton_gemm_in_helper_process.py);
- a library mapped later that defines launch entries and is neither built for the solution nor installed (a
  copy of the runtime or of cuBLAS in the candidate's folder) is reported: its launches would not be seen.

x86-64 only (the registers are read by their System V places). Tested on the CPU with stand-in libraries
(tests/evaluation/test_launch_watch.py); not yet run on a GPU host.
"""

from __future__ import annotations

import fcntl
import os
import platform
import struct
import threading

from kernelgym.evaluation import gpu_evidence as ge
from kernelgym.evaluation.call_probe import (
    PERF_TYPE_TRACEPOINT,
    open_uprobe,
    perf_records,
    uprobe_pmu_type,
    uprobe_tracepoint,
)
from kernelgym.evaluation.code_kinds import torch_folders as installed_torch_folders
from kernelgym.evaluation.ip_sampler import executable_mappings_at, thread_ids
from kernelgym.evaluation.launch_decode import (
    DRIVER_ENTRIES,
    LAUNCH_ENTRIES,
    PERF_EVENT_IOC_SET_OUTPUT,
    REGISTERS,
    RUNTIME_ENTRIES,
    STACK_BYTES,
    Launch,
    Places,
    file_digest,
    installed_folders,
    launch_size,
    maps_cuda,
    raise_open_file_limit,
    threads_of,
)
from kernelgym.evaluation.perf_events import (
    PERF_EVENT_IOC_ENABLE,
    PERF_RECORD_LOST,
    PERF_RECORD_SAMPLE,
    PerfUnavailable,
    Ring,
)
from kernelgym.evaluation.symbols import symbols


class EvaluationLaunchWatch:
    """The candidate's launches, from start(main_pid) to close(), taken per batch with take()."""

    def __init__(self, own_files: set[str], torch_folders: tuple[str, ...] | None = None,
                 vendor_folders: tuple[str, ...] | None = None, ring_pages: int = 64):
        if torch_folders is None:
            torch_folders = installed_torch_folders()
        self.own_files = own_files  # the Classifier's set: builds served later are seen as they come
        self.torch_folders = torch_folders
        self.vendor_folders = installed_folders() if vendor_folders is None else vendor_folders
        self.ring_pages = ring_pages
        self.refused = ""
        self.main_pid = 0
        self._targets: list[tuple[str, int, str, str]] = []  # (library, offset, entry, kind)
        self._tracepoints: dict[tuple[str, int], int | None] = {}
        self._probe_type = 0
        self._rings: dict[int, Ring] = {}  # tid -> the thread's ring (its other events write there)
        self._fds: list[int] = []  # every event's fd but the rings'
        self._counting: list[int] = []  # inherited counting events (tracepoints only)
        self._counted = 0
        self._probed_files: set[tuple[int, int]] = set()  # (device, inode) of the probed libraries
        self._known_files: set[str] = set()  # mapped executable files already looked at
        self._by_offset: dict[tuple[str, int], tuple[str, str]] = {}
        self._keys: dict[tuple, ge.LaunchKey | bool] = {}  # what a caller, kernel, entry and pid come to
        self._own_digests: dict[str, tuple[int, bytes]] = {}  # built file -> (size, sha256)
        self._copies: dict[tuple, bool] = {}  # (device, inode, size, mtime) -> a copy of a built file

    # starting ---------------------------------------------------------------------------------------------
    def start(self, main_pid: int, tree_pids: list[int] | tuple[int, ...] = ()) -> bool:
        """Probe the runtime and driver libraries the main process maps, on every thread of the tree's
        processes (counting too, inherited, where tracefs defines the uprobes). False when refused."""
        self.main_pid = main_pid
        try:
            if platform.machine() != "x86_64":
                raise PerfUnavailable(f"launch registers are read on x86-64 only, not {platform.machine()}")
            libraries = sorted({path for _, _, path, _ in executable_mappings_at(main_pid)
                                if os.path.basename(path).startswith(ge.RUNTIME_LIBRARIES)})
            if not libraries:
                raise PerfUnavailable("no CUDA runtime or driver library is mapped in the candidate")
            for library in libraries:
                table = symbols(library)
                offsets = table.file_offsets(LAUNCH_ENTRIES) if table else {}
                for entry, offset in offsets.items():
                    kind = RUNTIME_ENTRIES.get(entry) or DRIVER_ENTRIES[entry]
                    self._targets.append((os.path.realpath(library), offset, entry, kind))
                found = os.stat(library)
                self._probed_files.add((found.st_dev, found.st_ino))
            if not self._targets:
                raise PerfUnavailable(f"no launch entry found in {libraries}")
            self._tracepoints = {(lib, off): uprobe_tracepoint(lib, off) for lib, off, _, _ in self._targets}
            tracefs = all(self._tracepoints.values())
            self._probe_type = PERF_TYPE_TRACEPOINT if tracefs else uprobe_pmu_type()
            threads = sorted(tid for pid in sorted({main_pid, *tree_pids}) for tid in threads_of(pid))
            raise_open_file_limit(len(threads) * len(self._targets) * 2 + 256)
            for tid in threads:
                self._open_thread(tid, counting=tracefs)
        except PerfUnavailable as refused:
            self.refused = str(refused)
            self.close()
            return False
        except ProcessLookupError:
            self.refused = "the candidate's process is gone"
            self.close()
            return False
        self._known_files = {path for _, _, path, _ in executable_mappings_at(main_pid)}
        return True

    def _open(self, tid: int, library: str, offset: int, sampling: bool) -> int | None:
        """A sampling event (registers and stack top copied), or a counting one inherited by every thread
        and process born of this thread (tracepoints only)."""
        return open_uprobe(self._probe_type, tid, library, offset, self._tracepoints.get((library, offset)),
                           sampling=sampling, registers=tuple(number for _, number in REGISTERS),
                           stack_bytes=STACK_BYTES, inherit=not sampling)

    def _open_thread(self, tid: int, counting: bool) -> None:
        """A thread's sampling events, all into one ring, enabled; and its inherited counting events."""
        ring = None
        for library, offset, _, _ in self._targets:
            fd = self._open(tid, library, offset, sampling=True)
            if fd is None:
                return
            if ring is None:
                ring = self._rings[tid] = Ring(tid, fd, self.ring_pages)
            else:
                fcntl.ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, ring.fd)
                self._fds.append(fd)
            fcntl.ioctl(fd, PERF_EVENT_IOC_ENABLE, 0)
            if counting:
                counter = self._open(tid, library, offset, sampling=False)
                if counter is not None:
                    fcntl.ioctl(counter, PERF_EVENT_IOC_ENABLE, 0)
                    self._counting.append(counter)

    # taking -----------------------------------------------------------------------------------------------
    def take(self, number: int, phase: str, calls: int = 1, batch_ms: float | None = None,
             tree_pids: list[int] | tuple[int, ...] = ()) -> ge.BatchLaunches:
        """The launches since the last take, attributed, as one batch's evidence; then probes the threads
        of the tree that appeared meanwhile (their launches until now counted as not followed)."""
        batch = ge.BatchLaunches(number, phase, calls, batch_ms=batch_ms)
        records = b"".join(ring.take() for ring in self._rings.values())
        sampled, lost = self._attribute(records, batch)
        batch.lost = lost + sum(ring.overflowed for ring in self._rings.values())
        counted = sum(struct.unpack("<Q", os.read(fd, 8))[0] for fd in self._counting)
        if self._counting:
            batch.unfollowed_launches = max(0, counted - self._counted - sampled)
        self._counted = counted
        pids = sorted({self.main_pid, *tree_pids})
        batch.cuda_helpers = tuple(pid for pid in pids if pid != self.main_pid and maps_cuda(pid))
        batch.unprobed_runtimes = tuple(self.unprobed_runtimes(pids))
        fresh = 0
        for pid in pids:
            try:
                for tid in sorted(thread_ids(pid) - set(self._rings)):
                    fresh += 1
                    self._open_thread(tid, counting=False)  # counted already, through inheritance
            except (ProcessLookupError, PerfUnavailable):
                continue
        if not self._counting:  # no inherited count: a thread found now was born unwatched
            batch.threads_born_unwatched += fresh
        return batch

    def _attribute(self, records: bytes, batch: ge.BatchLaunches) -> tuple[int, int]:
        """Adds each sampled launch to `batch`; (launches sampled, launches the kernel dropped)."""
        places = Places()
        sampled = lost = 0
        for kind, body in perf_records(records):
            if kind == PERF_RECORD_LOST:
                lost += struct.unpack_from("<Q", body, 8)[0]
            elif kind == PERF_RECORD_SAMPLE:
                sampled += 1
                self._add(batch, self._parse(body, places))
        return sampled, lost

    def _parse(self, body: bytes, places: Places) -> Launch:
        ip, pid, tid, abi = struct.unpack_from("<QIIQ", body)
        pos = 24
        regs = {}
        if abi:
            for name, _ in REGISTERS:
                regs[name] = struct.unpack_from("<Q", body, pos)[0]
                pos += 8
        size = struct.unpack_from("<Q", body, pos)[0]
        stack = body[pos + 8:pos + 8 + size]
        if size:
            stack = stack[:struct.unpack_from("<Q", body, pos + 8 + size)[0]]
        entry, kind = self._entry(places.at(pid, ip))
        caller = places.at(pid, struct.unpack_from("<Q", stack, 0)[0])[0] if len(stack) >= 8 else "[no stack]"
        function, threads = launch_size(kind, regs, stack) if regs else (None, None)
        stub, stub_symbol = None, ""
        if kind in ("dim3", "runtime_config") and function is not None:
            stub, stub_symbol = places.symbol(pid, function)
        return Launch(pid, tid, entry if kind != "graph" else entry + "#graph", caller, stub, stub_symbol,
                      threads)

    def _entry(self, where: tuple[str, int]) -> tuple[str, str]:
        if not self._by_offset:
            self._by_offset = {(lib, off): (entry, kind) for lib, off, entry, kind in self._targets}
        library, offset = where
        found = self._by_offset.get((library, offset))
        if found is None and library.startswith("/"):
            found = self._by_offset.get((os.path.realpath(library), offset))
        return found or ("?", "?")

    def _add(self, batch: ge.BatchLaunches, launch: Launch) -> None:
        seen = (launch.caller, launch.stub, launch.stub_symbol, launch.entry, launch.pid)
        key = self._keys.get(seen)
        if key is None:
            caller = self._kind(launch.caller)
            graph = launch.entry.endswith("#graph")
            if graph:
                kernel = ge.UNKNOWN
            elif launch.stub is not None and self._kind(launch.stub) == ge.OWN:
                kernel = ge.OWN
            else:
                kernel = ge.kernel_kind(launch.stub, launch.stub_symbol, self.own_files, self.torch_folders,
                                        self.vendor_folders)
            key = None if caller == ge.RUNTIME else ge.launch_key(caller, kernel, graph,
                                                                  helper=launch.pid != self.main_pid)
            self._keys[seen] = key or False
        if key:  # the runtime calling the driver is dropped: counted where the launch was made
            batch.add(key, 1, None if key.graph else launch.threads)

    def _kind(self, path: str) -> str:
        """gpu_evidence.code_kind, and own for a byte-for-byte copy of a built file: Triton copies the
        launcher module the worker built into the candidate's private cache and loads it from there."""
        kind = ge.code_kind(path, self.own_files, self.torch_folders, self.vendor_folders)
        if kind == ge.FOREIGN and path.startswith("/") and self._copy_of_built(path):
            return ge.OWN
        return kind

    def _copy_of_built(self, path: str) -> bool:
        try:
            found = os.stat(path)
        except OSError:
            return False
        key = (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns)
        if key not in self._copies:
            for built in self.own_files - set(self._own_digests):
                try:
                    self._own_digests[built] = (os.path.getsize(built), file_digest(built))
                except OSError:
                    self._own_digests[built] = (-1, b"")
            sizes = {size for size, _ in self._own_digests.values()}
            self._copies[key] = found.st_size in sizes and \
                file_digest(path) in {digest for _, digest in self._own_digests.values()}
        return self._copies[key]

    def unprobed_runtimes(self, pids: list[int] | tuple[int, ...] = ()) -> list[str]:
        """Files mapped since the start, in the tree's processes, that define launch entries and were
        neither built for the solution nor installed (a copied runtime or cuBLAS): launches there go
        unseen."""
        found = []
        for pid in sorted({self.main_pid, *pids}):
            try:
                mapped = {path for _, _, path, _ in executable_mappings_at(pid) if path.startswith("/")}
            except ProcessLookupError:
                continue
            for path in sorted(mapped - self._known_files):
                self._known_files.add(path)
                table = symbols(path) if self._kind(path) == ge.FOREIGN else None
                if table is not None and table.file_offsets(("cuLaunchKernel", "cudaLaunchKernel",
                                                             "cuLaunchKernelEx")):
                    found.append(path)
        return found

    @property
    def events(self) -> int:
        """Perf events open (a file descriptor each; closing one made through the uprobe PMU waits)."""
        return len(self._rings) + len(self._fds) + len(self._counting)

    def close(self, wait: bool = True) -> None:
        """Every event closed; wait=False leaves that to a thread of its own: closing them waits for the
        kernel (0.6-0.8 s for tens of events on the CPU VM, benchmarks/judge_speed/launch_watch_cost.py)."""
        rings, fds = list(self._rings.values()), self._fds + self._counting
        self._rings, self._fds, self._counting = {}, [], []

        def close_all() -> None:
            for ring in rings:
                ring.close()
            for fd in fds:
                os.close(fd)

        if wait:
            close_all()
        else:
            threading.Thread(target=close_all, name="launch-watch-close", daemon=True).start()
