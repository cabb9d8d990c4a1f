"""Profile stage (inside the candidate's process): where the candidate's time goes.

Coverage is the share of the candidate's time spent in kernels it built; ATen compute ops outside the
glue allow-list are listed with their share, so heavy PyTorch compute can be ruled a passthrough.
"""

from __future__ import annotations

import re
import time
from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kernelgym import kernels
from kernelgym.evaluation import rules

_clock_ns = time.process_time_ns  # CPU time: preemption on a loaded machine is nobody's compute

# ATen ops that allocate, view, reshape or move data: allowed in forward as glue.
GLUE_OPS = {
    "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::zeros", "aten::zeros_like", "aten::ones",
    "aten::ones_like", "aten::full", "aten::new_empty", "aten::new_zeros", "aten::fill_", "aten::zero_",
    "aten::contiguous", "aten::view", "aten::reshape", "aten::_reshape_alias", "aten::_unsafe_view",
    "aten::as_strided", "aten::t", "aten::transpose", "aten::permute", "aten::expand", "aten::unsqueeze",
    "aten::squeeze", "aten::flatten", "aten::unflatten", "aten::select", "aten::slice", "aten::narrow",
    "aten::copy_", "aten::clone", "aten::detach", "aten::alias", "aten::lift_fresh", "aten::to",
    "aten::_to_copy", "aten::resolve_conj", "aten::resolve_neg", "aten::item", "aten::_local_scalar_dense",
    "aten::numpy_T", "aten::view_as", "aten::split", "aten::chunk", "aten::unbind", "aten::stride",
    "aten::size", "aten::is_nonzero", "aten::result_type", "aten::_has_compatible_shallow_copy_type",
    "aten::set_", "aten::resize_", "aten::record_stream", "aten::cat", "aten::stack", "aten::pad",
    "aten::constant_pad_nd", "aten::arange", "aten::empty_permuted", "aten::split_with_sizes",
}
HEAVY_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
             "aten::mv",
             "aten::dot", "aten::addmv", "aten::einsum", "aten::convolution", "aten::_convolution",
             "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_transpose1d",
             "aten::conv_transpose2d",
             "aten::conv_transpose3d", "aten::mkldnn_convolution", "aten::scaled_dot_product_attention",
             "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::lstm", "aten::gru", "aten::rnn_tanh",
             "aten::_native_multi_head_attention", "aten::addbmm", "aten::tensordot"}
"""ATen ops that are the heavy work of a task: a solution may never leave them to PyTorch, at any share."""

# PyTorch's library kernels for the heavy work (cuBLAS GEMMs, cuDNN convolutions, flash attention).
_HEAVY_KERNEL_MARKS = ("gemm", "cublas", "cudnn", "conv", "xmma", "cutlass", "flash", "wgrad", "dgrad",
                       "fprop")

_BOUNDS = r"(?:__launch_bounds__\s*\([^)]*\)\s*)?"
_GLOBAL_KERNEL = re.compile(r"__global__\s+" + _BOUNDS + r"(?:static\s+)?void\s+" + _BOUNDS + r"(\w+)")


def own_kernel_names(module, source: str) -> set[str]:
    """Names of the GPU kernels the solution defines: its @triton.jit functions and CUDA __global__s."""
    names = set(_GLOBAL_KERNEL.findall(source))
    for value in vars(module).values():
        fn = getattr(value, "fn", None)
        if callable(fn) and type(value).__module__.startswith("triton"):
            names.add(getattr(fn, "__name__", ""))
    names.discard("")
    return names


def _launched_by_aten(own_name: str, by_aten: Counter) -> bool:
    return any(_is_own(kernel, {own_name}) for kernel in by_aten)


def _is_own(kernel: str, own: set[str]) -> bool:
    # A profiler name looks like "void relu_kernel<true>(float const*, ...)" or "relu_kernel_0d1d2".
    head = kernel.removeprefix("void ").split("(")[0].split("<")[0].strip()
    # Exact names only: a dummy kernel named like a library's must not claim that library's kernels.
    return head in own or _triton_suffix(head) in own


def _triton_suffix(head: str) -> str:
    """Triton may append a specialization suffix such as `_0d1d2de`; strip it."""
    stem, _, tail = head.rpartition("_")
    return stem if stem and re.fullmatch(r"\d+d(\d+d?)*e?|\d[\dde]*", tail) else head


class _OpTimer(TorchDispatchMode):
    """Times every ATen op that forward calls (a dispatch mode: far cheaper than starting torch.profiler)."""

    def __init__(self):
        super().__init__()
        self.ms: dict[str, float] = {}
        self.nested_ms = 0.0  # op time spent inside the solution's own kernels (C++ calling torch)
        self.overhead_ms = 0.0  # this mode's own cost, taken out of the forward's wall time

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if getattr(func, "namespace", "aten") in kernels.OWN_OP_NAMESPACES:  # the solution's own operator
            return self._own_operator(func, args, kwargs or {})
        entered = _clock_ns()
        out = func(*args, **(kwargs or {}))
        done = _clock_ns()
        name = "aten::" + func.__name__.split(".")[0]
        self.ms[name] = self.ms.get(name, 0.0) + (done - entered) / 1e6
        left = _clock_ns()
        if kernels.KERNEL_STATS.depth > 0:  # the whole handler, so its own overhead is not credited as "own"
            self.nested_ms += (left - entered) / 1e6
        self.overhead_ms += (left - done) / 1e6
        return out


    def _own_operator(self, func, args, kwargs):
        """The solution's own operator runs with this mode still on, straight to its kernel for the inputs'
        device, so the ATen ops it calls inside are timed like any (a passthrough inside an operator of its
        own was `ok` where perf events are refused: a mode is off while it handles an op)."""
        cuda = any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)
        key = torch._C.DispatchKey.CUDA if cuda else torch._C.DispatchKey.CPU
        with self:
            return func.redispatch(torch._C.DispatchKeySet(key), *args, **kwargs)


def warm_up() -> None:
    """Pay the dispatch mode's one-time setup in the worker, before it forks evaluation processes."""
    with _OpTimer():
        torch.ones(2).add(1)


def profile_batch(batch, device: str, launches, own: set[str], no_work_batch=None) -> tuple[list, dict]:
    """Run one batch (a callable returning its outputs) under the profiler; its outputs and where time went.

    Evidence for the own-kernel and torch-compute rules. It runs in the candidate's process, so it is
    evidence a native cheat could forge; what it can forge is a passthrough's label, never correctness or
    the trusted clock's time. `no_work_batch` runs the same harness on a stand-in that computes nothing.
    """
    if device.startswith("cuda"):
        return _gpu_profile(batch, launches, own)
    return _cpu_profile(batch, launches, no_work_batch)


# At most this much of a call's untracked time is put down to the harness: the stand-in runs in the
# candidate's process, and a candidate that slowed it down must not hide more hidden work than this.
MAX_HARNESS_MS_PER_CALL = 0.5


def _harness_ms(no_work_batch, calls: int) -> float:
    """CPU ms outside ATen that the batch's harness and PyTorch's call machinery cost a stand-in that
    computes nothing (an autograd round trip through Python is most of an honest tiny backward's time):
    what every solution pays, so not hidden work. 0 when there is no stand-in or it cannot run."""
    if no_work_batch is None:
        return 0.0
    try:
        plain_ms = min(_plain_run(no_work_batch)[1] for _ in range(PLAIN_RUNS))
        timer = _OpTimer()
        with timer:
            no_work_batch()
    except Exception:  # noqa: BLE001 - outputs the stand-in cannot mimic: no allowance
        return 0.0
    return min(max(0.0, plain_ms - sum(timer.ms.values())), MAX_HARNESS_MS_PER_CALL * calls)


def _cpu_profile(batch, launches, no_work_batch=None) -> tuple[list, dict]:
    """The batch once plain (its CPU time and the solution's own kernel time), then once under the op timer
    (what ATen did): the mode's own per-op cost never counts against the solution, nor what the harness
    costs a stand-in that computes nothing."""
    warm_up()  # the mode's first use in a process costs far more than any op: not the candidate's time
    calls_before = kernels.KERNEL_STATS.calls + launches.count
    outputs, plain_ms, own_plain_ms = _plain_run(batch)
    own_calls = kernels.KERNEL_STATS.calls + launches.count - calls_before
    for _ in range(PLAIN_RUNS - 1):  # the least disturbed run of the batch stands for its code
        again, ms, own = _plain_run(batch)
        del again
        if ms - own < plain_ms - own_plain_ms:
            plain_ms, own_plain_ms = ms, own
    timer = _OpTimer()
    with timer:
        again = batch()
    del again
    # Torch ops called from inside the solution's kernels count as torch, not as its own work.
    own_ms = min(max(0.0, own_plain_ms - timer.nested_ms), plain_ms)
    compute = [(k, ms) for k, ms in timer.ms.items() if k not in GLUE_OPS]
    compute_ms = sum(ms for _, ms in compute)
    outside_ms = sum(timer.ms.values()) - timer.nested_ms  # ATen outside the solution's kernels
    harness_ms = _harness_ms(no_work_batch, max(1, len(outputs)))
    untracked_ms = max(0.0, plain_ms - own_plain_ms - outside_ms - harness_ms)
    ranked = sorted(compute, key=lambda kv: -kv[1])
    return outputs, {
        "coverage": own_ms / plain_ms, "own_kernel_calls": own_calls,
        "torch_compute_share": min(1.0, compute_ms / plain_ms), "torch_compute_ms": compute_ms,
        "untracked_ms": untracked_ms, "untracked_share": untracked_ms / plain_ms, "harness_ms": harness_ms,
        "heavy_ops_called": sorted(k for k, _ in compute if k in HEAVY_OPS),
        "top_ops": ranked[:5], "heavy_torch_ops": [k for k, ms in ranked if ms / plain_ms > 0.05][:5],
        "total_ms": plain_ms,
    }


# Plain runs of the profiled batch. On a loaded machine one run can cost more CPU time than its code needs
# (caches and cores shared with other tenants), which would count as "untracked" (neither the solution's
# kernels nor ATen) and call an honest solution a hack; the run with the least such time is kept.
PLAIN_RUNS = 3


def _plain_run(batch) -> tuple[list, float, float]:
    """(outputs, wall ms, ms inside the solution's own kernels) of one run of the batch."""
    own_before = kernels.KERNEL_STATS.time_ns
    start = _clock_ns()
    outputs = batch()
    plain_ms = max((_clock_ns() - start) / 1e6, 1e-9)
    return outputs, plain_ms, (kernels.KERNEL_STATS.time_ns - own_before) / 1e6


def _gpu_profile(batch, launches, own: set[str]) -> tuple[list, dict]:
    from torch.profiler import ProfilerActivity, profile

    calls_before = kernels.KERNEL_STATS.calls + launches.count
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        outputs = batch()
    own_calls = kernels.KERNEL_STATS.calls + launches.count - calls_before
    return outputs, _gpu_summary(prof.key_averages(), own_calls, own, launched_by_aten(prof.events()))


def launched_by_aten(events) -> Counter:
    """Kernel launches made inside an ATen op, by kernel name. The profiler links each kernel to the op
    that launched it (by correlation id); a kernel launched by ATen is PyTorch's work whatever its name,
    so a solution defining a dummy kernel under a library kernel's exact name gains nothing."""
    found: Counter = Counter()
    for event in events:
        if str(getattr(event, "name", "")).startswith("aten::"):
            found.update(getattr(kernel, "name", "") for kernel in getattr(event, "kernels", ()) or ())
    return found


# Kernels that allocate-and-fill, copy or move memory: glue around a solution's kernels, not compute.
_GLUE_KERNEL_MARKS = ("fill", "memset", "memcpy", "copy", "catarray", "zero")


def _is_glue(kernel: str) -> bool:
    name = kernel.lower()
    return any(mark in name for mark in _GLUE_KERNEL_MARKS)


def _is_device_event(event) -> bool:
    """Work that ran on the device. The device type alone decides: the runtime's calls (cudaLaunchKernel)
    and aten ops are host events, and a name filter would drop a solution's own kernel named `cuda_*`."""
    device_type = getattr(event, "device_type", None)
    return getattr(device_type, "name", str(device_type)) in ("CUDA", "PrivateUse1")


def _gpu_summary(events, own_calls: int, own: set[str], by_aten: Counter | None = None) -> dict:
    by_aten = by_aten or Counter()
    own = {name for name in own if not _launched_by_aten(name, by_aten)}
    kernels_ms = []
    for e in events:
        # Kernels only: a CPU-side range (an aten op, an autograd.Function's `_ReLU` or its `_ReLUBackward`
        # node) also carries the device time of the kernels launched inside it, the solution's own included.
        if not _is_device_event(e):
            continue
        device_ms = getattr(e, "self_device_time_total", None)
        if device_ms is None:
            device_ms = getattr(e, "self_cuda_time_total", 0)
        if device_ms:
            kernels_ms.append((e.key, device_ms / 1e3))
    total = sum(ms for _, ms in kernels_ms) or 1e-9
    own_ms = sum(ms for k, ms in kernels_ms if _is_own(k, own))
    # Every kernel the solution did not define is PyTorch's (cuBLAS, cuDNN, ATen's elementwise kernels...),
    # except allocation, fill and copy kernels: glue that honest solutions need (torch::zeros_like outputs).
    torch_kernels = [(k, ms) for k, ms in kernels_ms if not _is_own(k, own) and not _is_glue(k)]
    torch_ms = sum(ms for _, ms in torch_kernels)
    torch_share = torch_ms / total
    # Kernel launches that are not the solution's own (its count of what PyTorch and the vendors launched,
    # checked against the launches seen from outside its process); copies and memsets are no launches.
    other_launches = sum(int(getattr(e, "count", 1) or 1) for e in events if _is_device_event(e)
                         and not _is_own(e.key, own) and not e.key.startswith(("Memcpy", "Memset")))
    return {
        "other_kernel_launches": other_launches,
        "coverage": own_ms / total if kernels_ms else 0.0,
        # Launched kernels the profiler saw, CUDA-graph replays included: the evidence that own kernels ran.
        "own_kernel_calls": max(own_calls, sum(1 for k, _ in kernels_ms if _is_own(k, own))),
        "own_kernel_ms": own_ms, "torch_compute_ms": torch_ms,
        "torch_compute_share": torch_share,
        "top_ops": sorted(kernels_ms, key=lambda kv: -kv[1])[:5],
        "heavy_torch_ops": [k for k, ms in sorted(torch_kernels, key=lambda kv: -kv[1])
                            if ms / total > 0.05][:5],
        "heavy_ops_called": sorted({k for k, _ in torch_kernels
                                    if any(m in k.lower() for m in _HEAVY_KERNEL_MARKS)}),
        "total_ms": total,
    }


def judge_profile(data: dict, calls: int, backend: str, options) -> tuple[rules.Rule, str] | None:
    """(rule, message) when the profiled batch shows the work was not the solution's own, else None."""
    if int(data.get("own_kernel_calls", 0)) == 0:
        return rules.KERNEL_NOT_CALLED, f"the profiled calls ran none of the solution's {backend} kernels"
    heavy = [str(op) for op in data.get("heavy_ops_called", [])]
    if heavy:
        return rules.TORCH_COMPUTE, f"forward left the heavy work to PyTorch ({', '.join(heavy[:3])})"
    untracked = float(data.get("untracked_ms", 0.0)) / calls
    if untracked > options.min_untracked_ms and float(data.get("untracked_share", 0.0)) > \
            options.max_untracked_share:
        return rules.UNTRACKED_COMPUTE, (f"{untracked:.3g} ms of each call ran in neither the solution's own "
                                         "kernels nor PyTorch (another library, or hidden work)")
    share = float(data.get("torch_compute_share", 0.0))
    if share > options.max_torch_share:
        ops = ", ".join(str(k) for k in data.get("heavy_torch_ops", [])[:3]) or "PyTorch ops"
        return rules.TORCH_COMPUTE, (f"{share:.0%} of the candidate's time is PyTorch compute ({ops}), "
                                     "not its own kernels")
    return None
