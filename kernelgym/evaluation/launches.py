"""GPU kernel launches of the candidate's profiled batch, counted by the library that made them, from outside
its process (issue 28: evidence on a GPU that its own code launched the work).

The worker sets uprobes (`call_probe.CallProbe`) on the launch entries of the CUDA runtime and driver
libraries mapped in the candidate, on the threads it has when the batch starts. Each launch is attributed
to the file its return address lies in:

- torch: PyTorch's own libraries (ATen's kernels, its glue fills and copies);
- vendor: the compute libraries PyTorch calls (cuBLAS, cuDNN, cuFFT...): a task's heavy work by nature;
- runtime: the CUDA runtime or driver calling itself (a runtime launch seen again at the driver);
- other: everything else: the solution's extension, a Triton launcher.

Graph launches are counted apart: one launch stands for any number of kernels.

What this can and cannot say: counts and origins, never durations; launches from threads born during the
batch are not seen (a perf-PMU uprobe is not inherited, see call_probe.py).

Measured on an H100 (benchmarks/results/judge_trust/launch_evidence_gpu.md): 8 honest Triton and CUDA examples
had every launch
attributed to their own code (Triton's launcher, the extension's library) and stayed `ok` with the rules
on. But an event per thread, function and library made the profile stage 4.7-4.9 s instead of 0.1-0.2 s:
closing a uprobe made through the perf PMU costs ~88 ms, serialized. The uprobes are now defined once in
tracefs where it can be mounted (closing all of them then waits one grace period, ~0.7 s, done off the
evaluation's path); not yet measured on a GPU host, so it stays opt-in (`EvalOptions.launch_evidence`,
`launch_rules` to decide).
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from dataclasses import dataclass, field

from kernelgym.evaluation.call_probe import CallProbe
from kernelgym.evaluation.ip_sampler import executable_mappings_at

RUNTIME_ENTRIES = ("cudaLaunchKernel", "cudaLaunchKernel_ptsz", "cudaLaunchKernelExC",
                   "cudaLaunchKernelExC_ptsz", "cudaLaunchCooperativeKernel",
                   "cudaLaunchCooperativeKernel_ptsz")
DRIVER_ENTRIES = ("cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz",
                  "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz")
GRAPH_ENTRIES = ("cudaGraphLaunch", "cudaGraphLaunch_ptsz", "cuGraphLaunch", "cuGraphLaunch_ptsz")
VENDOR_LIBRARIES = ("libcublas", "libcudnn", "libcufft", "libcurand", "libcusparse", "libcusolver", "libnccl")
RUNTIME_LIBRARIES = ("libcudart", "libcuda.so")
TORCH, VENDOR, RUNTIME, OTHER = "torch", "vendor", "runtime", "other"


@dataclass
class LaunchCounts:
    available: bool
    reason: str = ""  # why not available
    by_kind: dict[str, int] = field(default_factory=dict)  # torch / vendor / other kernel launches
    graph_launches: int = 0
    by_file: dict[str, int] = field(default_factory=dict)  # caller's file name -> kernel launches
    lost: int = 0

    def to_dict(self) -> dict:
        return {"available": self.available, "reason": self.reason, "by_kind": dict(self.by_kind),
                "graph_launches": self.graph_launches, "by_file": dict(self.by_file), "lost": self.lost}


def caller_kind(path: str, torch_folders: tuple[str, ...]) -> str:
    real = os.path.realpath(path) if path.startswith("/") else path
    name = os.path.basename(real)
    if name.startswith(RUNTIME_LIBRARIES):
        return RUNTIME
    if name.startswith(VENDOR_LIBRARIES):
        return VENDOR
    if real.startswith(torch_folders):
        return TORCH
    return OTHER


class LaunchWatch:
    """Probes one process's launch entries over one batch: start(pid) ... stop()."""

    def __init__(self) -> None:
        from kernelgym.evaluation.code_kinds import torch_folders

        self.torch_folders = torch_folders()
        self._probes: list[tuple[CallProbe, bool]] = []  # (probe, whether it probes graph launches)
        self.refused = ""

    def start(self, pid: int) -> bool:
        try:
            libraries = sorted({path for _, _, path, _ in executable_mappings_at(pid)
                                if os.path.basename(path).startswith(RUNTIME_LIBRARIES)})
        except ProcessLookupError:
            self.refused = "the candidate's process is gone"
            return False
        if not libraries:
            self.refused = "no CUDA runtime or driver library is mapped in the candidate's process"
            return False
        for library in libraries:
            driver = os.path.basename(library).startswith("libcuda.so")
            entries = DRIVER_ENTRIES if driver else RUNTIME_ENTRIES
            for functions, graphs in ((entries, False), (GRAPH_ENTRIES, True)):
                probe = CallProbe(pid, library, functions, ring_pages=32)
                if probe.start():
                    self._probes.append((probe, graphs))
                elif "is a function of" not in probe.refused:  # a library without these entries: no refusal
                    self.refused = probe.refused or "uprobes refused"
                    self.close()
                    return False
        return bool(self._probes)

    def stop(self) -> LaunchCounts:
        if self.refused:
            return LaunchCounts(False, self.refused)
        kinds: Counter = Counter()
        files: Counter = Counter()
        graphs = lost = 0
        for probe, graph in self._probes:
            counts = probe.stop(close=False)
            lost += counts.lost
            for caller, n in counts.calls_by_caller.items():
                kind = caller_kind(caller, self.torch_folders)
                if kind == RUNTIME:
                    continue  # a runtime launch seen again at the driver, counted where it was made
                if graph:
                    graphs += n
                else:
                    kinds[kind] += n
                    files[os.path.basename(caller) or caller] += n
        probes, self._probes = [probe for probe, _ in self._probes], []
        # Closing waits for the kernel (one grace period, ~0.7 s): off the evaluation's path.
        threading.Thread(target=lambda: [probe.close() for probe in probes], daemon=True).start()
        return LaunchCounts(True, by_kind=dict(kinds), graph_launches=graphs, by_file=dict(files), lost=lost)

    def close(self) -> None:
        for probe, _ in self._probes:
            probe.close()
        self._probes = []


def judge_launches(counts: LaunchCounts, profile: dict) -> tuple[str, str] | None:
    """(rule name, message) when the launches seen from outside contradict the candidate's own profile.

    - vendor: a compute library (cuBLAS, cuDNN...) launched kernels in the candidate's forward: the task's
      heavy work left to PyTorch's libraries, whatever the profile names them;
    - hidden: PyTorch's libraries launched more kernels than the profile shows as not the solution's own: the
      profile was made to leave them out or pass them off as own;
    - not_own: the profile credits the solution's kernels, but nothing outside PyTorch and its vendors
      launched a kernel, and no graph was launched."""
    if not counts.available:
        return None
    vendor = counts.by_kind.get(VENDOR, 0)
    if vendor:
        files = ", ".join(f for f in counts.by_file if f.startswith(VENDOR_LIBRARIES)) or "a vendor library"
        return "vendor", f"{vendor} kernel launches in forward came from {files} (seen from outside)"
    torch_launches = counts.by_kind.get(TORCH, 0)
    shown = int(profile.get("other_kernel_launches", -1))
    if shown >= 0 and torch_launches > shown:
        return "hidden", (f"PyTorch's libraries launched {torch_launches} kernels in the profiled batch, but "
                          f"its profile shows {shown} kernels that are not the solution's own")
    claimed = int(profile.get("own_kernel_calls", 0))
    if claimed and not counts.by_kind.get(OTHER, 0) and not counts.graph_launches:
        return "not_own", ("its profile credits the solution's kernels, but no kernel was launched from "
                           "outside PyTorch's libraries (seen from outside its process)")
    return None
