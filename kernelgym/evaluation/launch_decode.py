"""What one recorded CUDA launch says: the launch entries the worker probes, how each entry's registers and
stack give the kernel launched and its size, and where an address lies in a process (launch_watch.py takes
the records; gpu_evidence.py decides on them). x86-64 System V places.
"""

from __future__ import annotations

import os
import resource
import struct
from dataclasses import dataclass

from kernelgym.evaluation.call_probe import place_of
from kernelgym.evaluation.ip_sampler import executable_mappings_at, thread_ids
from kernelgym.evaluation.symbols import symbols

PERF_EVENT_IOC_SET_OUTPUT = 0x2405  # _IO('$', 5): this event's records go to another event's ring
# x86-64 perf register numbers of the System V argument registers and the stack pointer, in the order the
# kernel writes them (by number)
REGISTERS = (("cx", 2), ("dx", 3), ("si", 4), ("di", 5), ("sp", 7), ("r8", 16), ("r9", 17))
# the return address, a stack argument, a launch config in the caller's frame (Triton's launcher keeps its
# CUlaunchConfig there, below its params array): 512 bytes cost ~3 us more a launch than 64 on the CPU VM
STACK_BYTES = 512

# entry -> how its arguments say what was launched
RUNTIME_ENTRIES = {
    "cudaLaunchKernel": "dim3", "cudaLaunchKernel_ptsz": "dim3",
    "cudaLaunchCooperativeKernel": "dim3", "cudaLaunchCooperativeKernel_ptsz": "dim3",
    "cudaLaunchKernelExC": "runtime_config", "cudaLaunchKernelExC_ptsz": "runtime_config",
    "cudaGraphLaunch": "graph", "cudaGraphLaunch_ptsz": "graph"}
DRIVER_ENTRIES = {
    "cuLaunchKernel": "driver", "cuLaunchKernel_ptsz": "driver", "cuLaunchCooperativeKernel": "driver",
    "cuLaunchCooperativeKernel_ptsz": "driver", "cuLaunchKernelEx": "driver_config",
    "cuLaunchKernelEx_ptsz": "driver_config", "cuGraphLaunch": "graph", "cuGraphLaunch_ptsz": "graph",
    # the legacy entries, still exported: a launch through them must not go unseen
    "cuLaunch": "legacy", "cuLaunchGrid": "legacy", "cuLaunchGridAsync": "legacy"}
LAUNCH_ENTRIES = tuple(RUNTIME_ENTRIES) + tuple(DRIVER_ENTRIES)


def installed_folders() -> tuple[str, ...]:
    """Folders whose libraries the candidate cannot have written (read-only in its sandbox): the system's,
    CUDA's, and the Python packages torch is installed with (nvidia/ wheels: cuBLAS, cuDNN, the runtime)."""
    import torch

    site = os.path.dirname(os.path.dirname(os.path.realpath(torch.__file__)))
    return (site + os.sep, "/usr/local/cuda", "/usr/lib/", "/usr/lib64/", "/lib/", "/lib64/", "/opt/nvidia/")


@dataclass(frozen=True)
class Launch:
    """One launch as the kernel recorded it, attributed."""

    pid: int
    tid: int
    entry: str
    caller: str  # the caller's file
    stub: str | None  # the file the launched kernel's host stub lies in (runtime launches)
    stub_symbol: str
    threads: int | None


def _u32(value: int) -> int:
    return value & 0xFFFFFFFF


def _product(*values: int) -> int:
    total = 1
    for value in values:
        total *= value
    return total


def launch_size(kind: str, regs: dict[str, int], stack: bytes) -> tuple[int | None, int | None]:
    """(the kernel or function address, threads launched) from a launch entry's registers and stack (the
    stack copy starts at the return address). None where the arguments do not say."""
    if kind == "dim3":  # cudaLaunchKernel(func, dim3 grid, dim3 block, ...): each dim3 in two registers
        grid = (_u32(regs["si"]), regs["si"] >> 32, _u32(regs["dx"]))
        block = (_u32(regs["cx"]), regs["cx"] >> 32, _u32(regs["r8"]))
        return regs["di"], _product(*grid, *block)
    if kind == "driver":  # cuLaunchKernel(f, gx, gy, gz, bx, by, bz, ...): bz is the first stack argument
        if len(stack) < 12:
            return regs["di"], None
        bz = struct.unpack_from("<I", stack, 8)[0]
        return regs["di"], _product(_u32(regs["si"]), _u32(regs["dx"]), _u32(regs["cx"]), _u32(regs["r8"]),
                                    _u32(regs["r9"]), bz)
    if kind == "legacy":  # cuLaunch(f), cuLaunchGrid(f, w, h): the block was set apart, not known here
        return regs["di"], None
    if kind in ("runtime_config", "driver_config"):  # a config struct, often in the caller's frame
        function = regs["si"] if kind == "runtime_config" else regs["di"]
        at = regs["di"] - regs["sp"]
        if 0 <= at and at + 24 <= len(stack):
            return function, _product(*struct.unpack_from("<6I", stack, at))
        return function, None
    return None, None


class Places:
    """Where addresses lie in the processes of one take (their mappings read once, each address once)."""

    def __init__(self) -> None:
        self._maps: dict[int, list] = {}
        self._found: dict[tuple[int, int], tuple[str, int]] = {}
        self._symbols: dict[tuple[int, int], tuple[str, str]] = {}

    def at(self, pid: int, address: int) -> tuple[str, int]:
        found = self._found.get((pid, address))
        if found is None:
            if pid not in self._maps:
                try:
                    self._maps[pid] = executable_mappings_at(pid)
                except ProcessLookupError:
                    self._maps[pid] = []
            found = self._found[(pid, address)] = place_of(address, self._maps[pid])
        return found

    def symbol(self, pid: int, address: int) -> tuple[str, str]:
        """(file, function name) at a code address."""
        found = self._symbols.get((pid, address))
        if found is None:
            path, offset = self.at(pid, address)
            table = symbols(path) if path.startswith("/") else None
            found = self._symbols[(pid, address)] = (path, table.name_at(offset) if table is not None else "")
        return found


def file_digest(path: str) -> bytes:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.digest()


def threads_of(pid: int) -> set[int]:
    try:
        return thread_ids(pid)
    except ProcessLookupError:
        return set()


def maps_cuda(pid: int) -> bool:
    """Whether a process maps the CUDA driver library (it holds, or is making, a CUDA context)."""
    try:
        return any(os.path.basename(path).startswith("libcuda.so") for _, _, path, _ in
                   executable_mappings_at(pid))
    except ProcessLookupError:
        return False


def raise_open_file_limit(wanted: int) -> None:
    """Raise this process's open-file limit toward `wanted` (one fd per thread and entry, twice)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, target), hard))
