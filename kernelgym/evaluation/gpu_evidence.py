"""Whether the solution's own kernels did the work on a GPU, from evidence taken outside the candidate.

The CPU's verdict comes from instruction pointers sampled by the worker (own_code.py). A GPU's work is
kernels, and no tool reads another process's kernel names (CUPTI and Nsight inject into the process they
trace), so until now the GPU verdict came from torch.profiler run inside the candidate: its own Python can
rewrite it (tests/adversarial/triton_forge_gpu_profile_summary.py, cuda_forge_torch_profiler_names.py).
What the worker can see from outside is every launch (launch_watch.py: uprobes on the CUDA runtime's and
driver's launch entries):

- who launched it: the file the return address lies in (the caller), classified positively: `own` only for
  files the worker built for this solution (its extension libraries, Triton's launcher modules); PyTorch's
  folders, the vendors' libraries (cuBLAS, cuDNN... by the folder they are installed in, not by a name a copy
  could take), the runtime itself; anything else (ctypes, a copied or renamed library, code without a file)
  is `foreign`;
- what it launched, for a runtime launch: the `func` argument is the kernel's host stub, an address in the
  library that defines the kernel, so a PyTorch kernel launched through the solution's library (its GOT
  rewritten: cuda_launches_laundered_through_got.py) is still PyTorch's; ATen's stubs are told apart by
  symbol into housekeeping (fill, copy, cat: what honest solutions ask of torch too), heavy families (GEMM,
  convolution, attention) and other compute;
- how much, where the arguments say it: a launch's grid times block (threads launched);
- in which process: launches from a process of the candidate's tree other than its main one (a helper
  process with its own CUDA context: triton_gemm_in_helper_process.py) are never its kernels' work;
- graph launches, and what every earlier phase launched: a graph replays what was captured into it before,
  possibly at construction (triton_graph_replay_hides_cublas.py), so a graph is clean only if nothing the
  candidate ever launched was PyTorch's compute, a vendor's or foreign.

Each batch's evidence (`BatchLaunches`) comes from the same watch in every batch of the candidate from its
construction on: a uprobe is a breakpoint byte the candidate can read in its own memory
(cuda_uprobe_breakpoint_aware_passthrough.py), so watching some batches and not others tells it which ones
count. The candidate's in-process profile stays as a hint: `judge` lets it add a finding, never remove one,
and where the outside evidence is missing or incomplete the result is not verifiable whatever it says.

Pure functions over the observed evidence: the worker gathers it, this decides (tests/evaluation/
test_gpu_evidence.py on synthetic evidence).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

from kernelgym.evaluation import rules

# who launched (the caller's file) and what was launched (the kernel's host stub): kinds of code
OWN, TORCH, VENDOR, RUNTIME, FOREIGN = "own", "torch", "vendor", "runtime", "foreign"
# what was launched, finer for PyTorch's kernels; UNKNOWN: a driver launch (an opaque CUfunction handle)
TORCH_HOUSEKEEPING, TORCH_COMPUTE, TORCH_HEAVY, UNKNOWN = (
    "torch_housekeeping", "torch_compute", "torch_heavy", "unknown")
TIMED, PROFILED, UNTIMED = "timed", "profiled", "untimed"  # batch phases (untimed: construction, checks)

VENDOR_LIBRARIES = ("libcublas", "libcudnn", "libcufft", "libcurand", "libcusparse", "libcusolver", "libnccl",
                    "libnvjpeg", "libcutensor", "libnvrtc")
RUNTIME_LIBRARIES = ("libcudart", "libcuda.so")
# ATen kernels that allocate-and-fill, copy or concatenate (their host stubs' mangled names hold these)
HOUSEKEEPING_MARKS = ("FillFunctor", "fill_kernel", "direct_copy_kernel", "copy_kernel", "CatArrayBatched",
                      "memset", "memcpy", "zero_", "CopyFunctor", "copy_device_to_device")
# ATen's own heavy families inside PyTorch's libraries (flash and memory-efficient attention, CUTLASS GEMMs,
# gemv, convolutions): the task's heavy work, as a vendor's would be
HEAVY_MARKS = ("gemm", "gemv", "cutlass", "flash", "fmha", "attention", "convolution", "conv2d", "conv3d",
               "conv_depthwise", "im2col", "col2im", "xmma", "cublas", "cudnn", "scaled_mm", "bmm")
# Outside the candidate, counts or threads stand in for time: PyTorch's compute launches may be at most this
# share of a timed batch's compute (averaged over the batches); the in-process hint may still condemn below it
MAX_OUTSIDE_TORCH_SHARE = 0.5


@dataclass(frozen=True)
class LaunchKey:
    """One kind of launch. caller: own / torch / vendor / foreign (the runtime calling itself is dropped when
    seen, counted where the launch was made); kernel: own / torch_housekeeping / torch_compute /
    torch_heavy / vendor / foreign / unknown."""

    caller: str
    kernel: str = UNKNOWN
    graph: bool = False  # a graph launch: one launch replays any number of kernels captured earlier
    helper: bool = False  # made by a process of the candidate's tree other than its main process


@dataclass
class BatchLaunches:
    """What the worker saw of one batch of the candidate (or of its construction, as batch 0)."""

    number: int
    phase: str  # timed / profiled / untimed
    calls: int = 1
    counts: Counter = field(default_factory=Counter)  # LaunchKey -> launches
    threads: Counter = field(default_factory=Counter)  # kernel kind -> threads launched, where known
    threads_unknown: Counter = field(default_factory=Counter)  # kernel kind -> launches of unknown size
    batch_ms: float | None = None  # the worker's clock over the batch, round trip taken off
    lost: int = 0  # records the kernel dropped (a ring was full)
    # launches counted (inherited counts) but not sampled: made by threads or processes born since the
    # last take, which the watch could not attribute. Honest code launches from the threads it calls from.
    unfollowed_launches: int = 0
    threads_born_unwatched: int = 0  # threads found new at the take where no inherited count exists
    cuda_helpers: tuple[int, ...] = ()  # pids of the tree, not the main process, that hold a CUDA context
    # libraries mapped since, neither built for it nor installed, that define launch entries (a copied
    # runtime or driver): launches through them are not seen
    unprobed_runtimes: tuple[str, ...] = ()

    def add(self, key: LaunchKey, launches: int = 1, threads: int | None = None) -> None:
        self.counts[key] += launches
        if threads is None:
            self.threads_unknown[key.kernel] += launches
        else:
            self.threads[key.kernel] += threads

    def launches(self, **match) -> int:
        return sum(n for key, n in self.counts.items()
                   if all(getattr(key, name) == value for name, value in match.items()))


@dataclass
class GpuLaunchEvidence:
    available: bool = True
    reason: str = ""  # why not available (the host refused uprobes, no runtime library mapped...)
    batches: list[BatchLaunches] = field(default_factory=list)

    def judged(self) -> list[BatchLaunches]:
        return [b for b in self.batches if b.phase in (TIMED, PROFILED)]

    def timed(self) -> list[BatchLaunches]:
        return [b for b in self.batches if b.phase == TIMED]

    def summary(self) -> dict:
        """For the result (ProfileResult.launches): launches by kind over every batch watched, per phase."""
        by_phase: dict[str, Counter] = {}
        for batch in self.batches:
            counts = by_phase.setdefault(batch.phase, Counter())
            for key, n in batch.counts.items():
                name = f"{key.caller}/{key.kernel}" + ("/graph" if key.graph else "") + \
                       ("/helper" if key.helper else "")
                counts[name] += n
        judged = self.judged()
        return {"available": self.available, "reason": self.reason, "batches": len(self.batches),
                "launches": {phase: dict(c) for phase, c in by_phase.items()},
                "lost": sum(b.lost for b in judged),
                "unfollowed_launches": sum(b.unfollowed_launches for b in judged),
                "unprobed_runtimes": sorted({p for b in judged for p in b.unprobed_runtimes})}


@dataclass(frozen=True)
class GpuOwnCodeVerdict:
    """finding: (rule, message) when the work was not the solution's own, else None. decided: the outside
    evidence was complete enough to stand behind an `ok` (else the speedup must not be verified)."""

    finding: tuple[rules.Rule, str] | None
    decided: bool
    notes: tuple[str, ...] = ()


# classifying ------------------------------------------------------------------------------------------------

def _real(path: str) -> str:
    return os.path.realpath(path) if path.startswith("/") else path


def code_kind(path: str, own_files: set[str], torch_folders: tuple[str, ...],
              vendor_folders: tuple[str, ...] = ()) -> str:
    """The kind of code a mapped file is: own only for a file the worker built for this solution (by real
    path); the CUDA runtime or driver; PyTorch's folders; a vendor's library, by the folder it is installed
    in (a copy of cuBLAS under another name in the candidate's folder is foreign, not the vendor's); else
    foreign: ctypes' and Python's own code, a library the solution copied or wrote, memory without a file."""
    real = _real(path)
    if real in own_files:
        return OWN
    name = os.path.basename(real)
    installed = not vendor_folders or real.startswith(vendor_folders) or real.startswith(torch_folders)
    if name.startswith(RUNTIME_LIBRARIES) and installed:
        return RUNTIME
    if name.startswith(VENDOR_LIBRARIES) and installed:
        return VENDOR
    if real.startswith(torch_folders):
        return TORCH
    return FOREIGN


def torch_kernel_kind(symbol: str) -> str:
    """One of PyTorch's kernels, by its host stub's (mangled) name: housekeeping, a heavy family or compute.
    A stub without a name counts as compute."""
    if any(mark in symbol for mark in HOUSEKEEPING_MARKS):
        return TORCH_HOUSEKEEPING
    lowered = symbol.lower()
    if any(mark in lowered for mark in HEAVY_MARKS):
        return TORCH_HEAVY
    return TORCH_COMPUTE


def kernel_kind(stub_file: str | None, stub_symbol: str, own_files: set[str], torch_folders: tuple[str, ...],
                vendor_folders: tuple[str, ...] = ()) -> str:
    """What a runtime launch launched, from the file and symbol its `func` argument lies in. None: a driver
    launch (CUfunction handles are opaque), unknown."""
    if stub_file is None:
        return UNKNOWN
    kind = code_kind(stub_file, own_files, torch_folders, vendor_folders)
    if kind == TORCH:
        return torch_kernel_kind(stub_symbol)
    if kind == RUNTIME:  # no kernel lives in the runtime: a stub there is not one
        return FOREIGN
    return kind


def launch_key(caller: str, kernel: str, graph: bool = False, helper: bool = False) -> LaunchKey:
    """A driver launch made by the solution's own code launches its own kernel (the driver's handle is opaque:
    its module was loaded by the same code); any other caller's driver launch is judged by the caller."""
    if kernel == UNKNOWN and not graph:
        kernel = {OWN: OWN, VENDOR: VENDOR, FOREIGN: FOREIGN}.get(caller, UNKNOWN)
        if caller == TORCH:
            kernel = TORCH_COMPUTE  # PyTorch's driver launches: its jiterator, NVRTC-compiled compute
    return LaunchKey(caller, kernel, graph, helper)


# judging ----------------------------------------------------------------------------------------------------

_FOREIGN_WORK = (VENDOR, TORCH_HEAVY, TORCH_COMPUTE, FOREIGN)


def _dirty(key: LaunchKey) -> bool:
    """A launch whose kernel is not the solution's own work (housekeeping and own kernels are clean)."""
    return key.helper or key.caller in (VENDOR, FOREIGN) or key.kernel in _FOREIGN_WORK


def _hard_finding(batch: BatchLaunches) -> tuple[rules.Rule, str] | None:
    """Launches that are never the solution's own work, at any share."""
    helpers = batch.launches(helper=True)
    if helpers or batch.cuda_helpers:
        return rules.UNTRACKED_COMPUTE, (f"another process of the candidate's tree holds a CUDA context "
                                         f"({helpers} launches from it in batch {batch.number}): work done "
                                         "outside the solution's process")
    if batch.unfollowed_launches:
        return rules.UNTRACKED_COMPUTE, (f"{batch.unfollowed_launches} kernel launches in batch "
                                         f"{batch.number} came from threads or processes born during it, "
                                         "whose launches cannot be attributed")
    if batch.unprobed_runtimes:
        names = ", ".join(os.path.basename(p) for p in batch.unprobed_runtimes[:3])
        return rules.UNTRACKED_COMPUTE, (f"the candidate loaded a CUDA runtime or driver of its own "
                                         f"({names}): launches through it are not seen")
    vendor = sum(n for key, n in batch.counts.items()
                 if key.caller == VENDOR or key.kernel in (VENDOR, TORCH_HEAVY))
    if vendor:
        return rules.TORCH_COMPUTE, (f"{vendor} kernel launches in batch {batch.number} ran a vendor "
                                     "library's or PyTorch's heavy kernels (GEMM, convolution, attention), "
                                     "seen from outside the candidate")
    laundered = sum(n for key, n in batch.counts.items()
                    if key.caller == OWN and key.kernel in (TORCH_COMPUTE, TORCH_HEAVY, VENDOR))
    if laundered:
        return rules.TORCH_COMPUTE, (f"{laundered} of PyTorch's or a vendor's kernels were launched through "
                                     f"the solution's library in batch {batch.number}")
    foreign = sum(n for key, n in batch.counts.items() if key.caller == FOREIGN or key.kernel == FOREIGN)
    if foreign:
        return rules.UNTRACKED_COMPUTE, (f"{foreign} kernel launches in batch {batch.number} came from code "
                                         "the judge did not build for this solution (ctypes, a copied "
                                         "library, memory without a file)")
    return None


def _graph_finding(evidence: GpuLaunchEvidence) -> tuple[rules.Rule, str] | None:
    """A graph replays kernels captured before, maybe at construction: clean only if nothing the candidate
    ever launched (from construction on) was PyTorch's compute, a vendor's or foreign."""
    graphs = sum(b.launches(graph=True) for b in evidence.judged())
    if not graphs:
        return None
    dirty = Counter()
    for batch in evidence.batches:
        for key, n in batch.counts.items():
            if not key.graph and _dirty(key):
                dirty[key.kernel if key.kernel != UNKNOWN else key.caller] += n
    if not dirty:
        return None
    seen = ", ".join(f"{kind} {n}" for kind, n in dirty.most_common(3))
    return rules.TORCH_COMPUTE, (f"{graphs} CUDA graph launches in the judged batches may replay kernels "
                                 f"that were not the solution's own: it launched {seen} since its "
                                 "construction")


def _own_work(batch: BatchLaunches) -> tuple[int, int | None]:
    """(launches of the solution's own kernels, their threads where every one's size is known)."""
    own = batch.launches(kernel=OWN) + batch.launches(graph=True)
    unknown = batch.threads_unknown[OWN] + batch.launches(graph=True)
    return own, (batch.threads[OWN] if not unknown else None)


def _torch_share(batch: BatchLaunches) -> float | None:
    """PyTorch's compute in a timed batch: by threads launched where every compute launch's size is known,
    else by launches. None: no compute launched at all."""
    own, own_threads = _own_work(batch)
    torch = batch.launches(kernel=TORCH_COMPUTE)
    if not own + torch:
        return None
    torch_threads = batch.threads[TORCH_COMPUTE] if not batch.threads_unknown[TORCH_COMPUTE] else None
    if own_threads is not None and torch_threads is not None and own_threads + torch_threads:
        return torch_threads / (own_threads + torch_threads)
    return torch / (own + torch)


def _share_finding(evidence: GpuLaunchEvidence) -> tuple[rules.Rule, str] | None:
    """Timed batches, each counted once (as the timing's median counts it): none may leave all of its compute
    to PyTorch, nor may PyTorch's part average above MAX_OUTSIDE_TORCH_SHARE."""
    shares = []
    for batch in evidence.timed():
        own, _ = _own_work(batch)
        torch = batch.launches(kernel=TORCH_COMPUTE)
        if torch and not own:
            return rules.TORCH_COMPUTE, (f"batch {batch.number}: PyTorch launched {torch} compute kernels "
                                         "and the solution none of its own")
        share = _torch_share(batch)
        if share is not None:
            shares.append(share)
    if shares and sum(shares) / len(shares) > MAX_OUTSIDE_TORCH_SHARE:
        share = sum(shares) / len(shares)
        return rules.TORCH_COMPUTE, (f"PyTorch's compute kernels were {share:.0%} of the timed batches' "
                                     "compute launched (threads, or launches where their size is unknown; "
                                     f"{len(shares)} batches), seen from outside the candidate")
    return None


def _idle_finding(evidence: GpuLaunchEvidence, round_trip_ms: float) -> tuple[rules.Rule, str] | None:
    """A timed batch that launched nothing of the solution's: its own kernels were not what ran. Where it
    launched nothing at all yet took GPU time beyond the round trip, the work came from elsewhere."""
    for batch in evidence.timed():
        own, _ = _own_work(batch)
        if own:
            continue
        if not sum(batch.counts.values()) and batch.batch_ms is not None and \
                batch.batch_ms > 2 * max(round_trip_ms, 0.05):
            return rules.UNTRACKED_COMPUTE, (f"batch {batch.number} took {batch.batch_ms:.2f} ms and the "
                                             "candidate launched no kernel: the work ran elsewhere")
        return rules.KERNEL_NOT_CALLED, f"batch {batch.number} launched none of the solution's kernels"
    return None


def judge(evidence: GpuLaunchEvidence, hint: tuple[rules.Rule, str] | None = None,
          round_trip_ms: float = 0.0) -> GpuOwnCodeVerdict:
    """The own-code verdict on a GPU. Outside findings first (any judged batch: helper processes, vendors'
    and PyTorch's heavy kernels, PyTorch's kernels launched through the solution's library, foreign
    launchers; graphs over anything dirty; PyTorch's share of the timed batches' compute; batches with none
    of the solution's launches); then the in-process profile's `hint`, which can only condemn. Missing or
    incomplete outside evidence decides nothing: the hint may still condemn, the result is not verifiable."""
    notes: list[str] = []
    if not evidence.available:
        notes.append(f"GPU launch evidence unavailable ({evidence.reason}): not verifiable")
        return GpuOwnCodeVerdict(hint, False, tuple(notes))
    judged = evidence.judged()
    if not evidence.timed():
        notes.append("GPU launch evidence: no timed batch was watched: not verifiable")
        return GpuOwnCodeVerdict(hint, False, tuple(notes))
    for batch in judged:
        found = _hard_finding(batch)
        if found is not None:
            return GpuOwnCodeVerdict(found, True, tuple(notes))
    for found in (_graph_finding(evidence), _share_finding(evidence), _idle_finding(evidence, round_trip_ms)):
        if found is not None:
            return GpuOwnCodeVerdict(found, True, tuple(notes))
    incomplete = [b for b in judged if b.lost or b.threads_born_unwatched]
    if incomplete:
        lost = sum(b.lost for b in incomplete)
        born = sum(b.threads_born_unwatched for b in incomplete)
        notes.append(f"GPU launch evidence incomplete ({lost} records lost, {born} threads or processes born "
                     "in judged batches and not followed): not verifiable")
        return GpuOwnCodeVerdict(hint, False, tuple(notes))
    return GpuOwnCodeVerdict(hint, True, tuple(notes))
