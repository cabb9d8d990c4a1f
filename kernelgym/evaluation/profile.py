"""Profile stage (inside the candidate's process): where the candidate's time goes.

Coverage is the share of the candidate's time spent in kernels it built; ATen compute ops outside the
glue allow-list are listed with their share, so heavy PyTorch compute can be ruled a passthrough.
"""

from __future__ import annotations

import time

import torch

import kernelgym.kernels as kernels

_clock_ns = time.perf_counter_ns

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
# GPU kernels that belong to PyTorch's libraries rather than to the candidate.
TORCH_KERNEL_MARKERS = ("at::native", "cublas", "cudnn", "cutlass", "sm90_xmma", "sm80_xmma", "ampere_", "gemm",
                        "at_cuda_detail", "void at::", "Memcpy", "Memset", "elementwise_kernel", "reduce_kernel")


def profile_candidate(model, inputs: list, device: str, launches) -> dict:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    with torch.no_grad():
        model(*inputs)  # warm
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        own_before, calls_before = kernels.KERNEL_STATS.time_ns, kernels.KERNEL_STATS.calls + launches.count
        with profile(activities=activities) as prof:
            start = _clock_ns()
            model(*inputs)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            total_ms = (_clock_ns() - start) / 1e6
        own_cpu_ms = (kernels.KERNEL_STATS.time_ns - own_before) / 1e6
        own_calls = kernels.KERNEL_STATS.calls + launches.count - calls_before
    events = prof.key_averages()
    if device.startswith("cuda"):
        return _gpu_summary(events, own_calls)
    ops = [(e.key, e.self_cpu_time_total / 1e3) for e in events if e.key.startswith("aten::")]
    compute = [(k, ms) for k, ms in ops if k not in GLUE_OPS]
    busy = max(total_ms, 1e-9)
    torch_share = sum(ms for _, ms in compute) / busy
    return {
        "coverage": min(1.0, own_cpu_ms / busy),
        "own_kernel_calls": own_calls,
        "torch_compute_share": torch_share,
        "top_ops": sorted(compute, key=lambda kv: -kv[1])[:5],
        "heavy_torch_ops": [k for k, ms in sorted(compute, key=lambda kv: -kv[1]) if ms / busy > 0.05][:5],
        "total_ms": total_ms,
    }


def _gpu_summary(events, own_calls: int) -> dict:
    kernels_ms = []
    for e in events:
        device_ms = getattr(e, "self_device_time_total", None)
        if device_ms is None:
            device_ms = getattr(e, "self_cuda_time_total", 0)
        if device_ms and not e.key.startswith("aten::") and not e.key.startswith("cuda"):
            kernels_ms.append((e.key, device_ms / 1e3))
    total = sum(ms for _, ms in kernels_ms) or 1e-9
    torch_kernels = [(k, ms) for k, ms in kernels_ms if any(m in k for m in TORCH_KERNEL_MARKERS)]
    torch_share = sum(ms for _, ms in torch_kernels) / total
    return {
        "coverage": 1.0 - torch_share if kernels_ms else 0.0,
        "own_kernel_calls": own_calls,
        "torch_compute_share": torch_share,
        "top_ops": sorted(kernels_ms, key=lambda kv: -kv[1])[:5],
        "heavy_torch_ops": [k for k, ms in sorted(torch_kernels, key=lambda kv: -kv[1]) if ms / total > 0.05][:5],
        "total_ms": total,
    }
