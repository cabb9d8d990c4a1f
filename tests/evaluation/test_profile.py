"""Which GPU kernels are the solution's own: names come from its source, not from a list of torch's names."""

import types

from kernelgym.evaluation.profile import _is_own, own_kernel_names


def test_cuda_global_functions_are_own_kernels():
    source = ('__global__ void __launch_bounds__(256) gemm_bias_relu(float* a) {}\n'
              '__global__ void tail(float* x) {}')
    assert own_kernel_names(types.ModuleType("m"), source) == {"gemm_bias_relu", "tail"}


def test_profiler_names_match_own_kernels_only():
    own = {"sgemm_nn", "relu_kernel"}
    assert _is_own("void sgemm_nn<true>(float const*, float const*, float*, int, int, int)", own)
    assert _is_own("relu_kernel", own)
    assert not _is_own("void at::native::vectorized_elementwise_kernel<4, at::native::relu>(int, ...)", own)
    assert not _is_own("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", own)
    # A dummy kernel named like a library's kernel does not claim it.
    assert not _is_own("void at::native::vectorized_elementwise_kernel<4>(int)",
                       {"vectorized_elementwise_kernel"})
    assert not _is_own("sm90_xmma_gemm_f32f32", {"sm90"})
    assert _is_own("relu_kernel_0d1d2de", {"relu_kernel"})


def test_a_run_disturbed_once_is_not_counted_as_untracked_compute():
    """The profile reads the process's CPU time, and on a loaded machine one run of the batch can cost more
    of it than the code needs (caches and cores shared with other tenants: a test of the judge flaked that
    way under CI load). The least costly of the plain runs is kept; work done in every run stays counted."""
    import time

    import torch

    from kernelgym.evaluation.profile import _cpu_profile

    def spin(ms: float) -> None:
        end = time.process_time() + ms / 1e3
        while time.process_time() < end:
            pass

    runs = []

    def disturbed_once():
        runs.append(1)
        if len(runs) == 1:
            spin(50)  # one run paid 50 ms more CPU time than its code needs
        return [torch.ones(4)]

    _, data = _cpu_profile(disturbed_once, types.SimpleNamespace(count=0))
    assert data["untracked_ms"] < 20, data

    def always_elsewhere():
        spin(20)  # hidden work in every run: still there
        return [torch.ones(4)]

    _, data = _cpu_profile(always_elsewhere, types.SimpleNamespace(count=0))
    assert data["untracked_ms"] >= 15, data


def test_what_the_harness_costs_a_stand_in_is_not_untracked_compute():
    """An honest tiny backward is mostly the batch's harness and autograd's round trip through Python, outside
    ATen and outside its kernels; in CI it was judged untracked_compute (0.13-0.18 ms a call). What the same
    harness costs a stand-in that computes nothing is taken off, up to a bound the stand-in cannot stretch."""
    import time

    import torch

    from kernelgym.evaluation.profile import MAX_HARNESS_MS_PER_CALL, _cpu_profile

    def spin(ms: float) -> None:
        end = time.process_time() + ms / 1e3
        while time.process_time() < end:
            pass

    calls = 20

    def batch(harness_ms: float, hidden_ms: float = 0.0):
        def run():
            spin(harness_ms + hidden_ms)
            return [torch.ones(4) for _ in range(calls)]
        return run

    launches = types.SimpleNamespace(count=0)
    _, charged = _cpu_profile(batch(6), launches)
    assert charged["untracked_ms"] >= 5, charged  # without a stand-in the harness counts, as before
    _, honest = _cpu_profile(batch(6), launches, batch(6))
    assert honest["untracked_ms"] < 2, honest
    _, hidden = _cpu_profile(batch(6, hidden_ms=20), launches, batch(6))
    assert hidden["untracked_ms"] >= 15, hidden
    # A stand-in slowed down (it runs in the candidate's process) excuses no more than the bound.
    _, stretched = _cpu_profile(batch(6, hidden_ms=40), launches, batch(46))
    assert stretched["harness_ms"] <= MAX_HARNESS_MS_PER_CALL * calls + 1e-9
    assert stretched["untracked_ms"] >= 46 - MAX_HARNESS_MS_PER_CALL * calls - 4, stretched


def test_the_stand_in_mimics_a_backward_calls_outputs():
    """The stand-in goes through the same backward harness as a solution: its outputs take the upstream
    gradients, and the gradients of the inputs and of its parameter come back."""
    import torch

    from kernelgym.workers.child import BackwardPass, NoWorkModel, run_batch

    x, upstream = torch.randn(3, 5), torch.randn(3, 5)
    calls = [[x, 2, upstream, 1]]
    out = run_batch(NoWorkModel(calls, True, "cpu"), calls, "cpu", BackwardPass())
    assert [tuple(t.shape) for t in out[0]] == [(3, 5), (3, 5), (1,)]
    forward_only = run_batch(NoWorkModel(calls[:1], False, "cpu"), [[x, 2]], "cpu")
    assert forward_only[0].numel() == 0


def _event(key: str, device: str, self_device_us: float) -> types.SimpleNamespace:
    from torch.autograd import DeviceType

    return types.SimpleNamespace(key=key, device_type=getattr(DeviceType, device),
                                 self_device_time_total=self_device_us)


def test_an_autograd_function_range_is_not_counted_as_pytorch_compute():
    """An autograd.Function shows in the GPU profile as CPU ranges (`_ReLU`, `_ReLUBackward`) that carry the
    device time of the kernels launched inside them: the solution's own Triton kernels. On the H200 they were
    counted as PyTorch's compute and an honest backward was judged `hack`. Only device events are kernels."""
    from kernelgym.evaluation.profile import _gpu_summary

    events = [_event("_ReLU", "CPU", 100.0), _event("_ReLUBackward", "CPU", 120.0),
              _event("aten::empty", "CPU", 0.0), _event("relu_fwd_kernel", "CUDA", 100.0),
              _event("relu_bwd_kernel", "CUDA", 120.0), _event("Memcpy HtoD (Pageable -> Device)", "CUDA", 5)]
    summary = _gpu_summary(events, own_calls=2, own={"relu_fwd_kernel", "relu_bwd_kernel"})
    assert summary["torch_compute_ms"] == 0.0 and summary["heavy_torch_ops"] == []
    assert summary["coverage"] > 0.95


def test_pytorch_kernels_launched_from_an_autograd_function_are_still_pytorch_compute():
    from kernelgym.evaluation.profile import _gpu_summary

    events = [_event("_ReLUBackward", "CPU", 120.0), _event("relu_fwd_kernel", "CUDA", 100.0),
              _event("void at::native::elementwise_kernel<4, threshold_backward>(int)", "CUDA", 120.0)]
    summary = _gpu_summary(events, own_calls=1, own={"relu_fwd_kernel"})
    assert summary["torch_compute_ms"] == 0.12 and summary["heavy_torch_ops"]


def test_an_own_kernel_named_like_the_cuda_runtime_is_still_the_solutions_work():
    """Kernels are told from host events by the device type, not by name: a solution's kernel `cuda_relu`
    counts as its own, and the runtime's `cudaLaunchKernel` (a host event) counts as nothing."""
    from kernelgym.evaluation.profile import _gpu_summary

    events = [_event("cudaLaunchKernel", "CPU", 0.0), _event("cuda_relu", "CUDA", 100.0),
              _event("void at::native::vectorized_elementwise_kernel<4, add>(int)", "CUDA", 10.0)]
    summary = _gpu_summary(events, own_calls=1, own={"cuda_relu"})
    assert summary["own_kernel_ms"] == 0.1
    assert summary["coverage"] > 0.9 and summary["torch_compute_ms"] == 0.01


def test_the_profile_rules_in_the_order_they_are_decided():
    """The in-process profile's word (GPU, or a CPU host without perf events): no own kernel call first,
    then a heavy PyTorch op, then untracked time, then PyTorch's share; an honest profile passes."""
    from kernelgym.evaluation import rules
    from kernelgym.evaluation.options import EvalOptions
    from kernelgym.evaluation.profile import judge_profile

    options = EvalOptions()
    honest = {"own_kernel_calls": 4, "torch_compute_share": 0.05, "untracked_ms": 0.0}
    assert judge_profile(honest, 4, "cuda", options) is None
    assert judge_profile({**honest, "own_kernel_calls": 0, "heavy_ops_called": ["aten::mm"]}, 4, "cuda",
                         options)[0] is rules.KERNEL_NOT_CALLED
    rule, message = judge_profile({**honest, "heavy_ops_called": ["aten::mm"]}, 4, "cuda", options)
    assert rule is rules.TORCH_COMPUTE and "aten::mm" in message
    hidden = {**honest, "untracked_ms": 40 * options.min_untracked_ms, "untracked_share": 0.9}
    assert judge_profile(hidden, 4, "cpp", options)[0] is rules.UNTRACKED_COMPUTE
    passthrough = {**honest, "torch_compute_share": 0.9, "heavy_torch_ops": ["sm90_xmma_gemm"]}
    rule, message = judge_profile(passthrough, 4, "cuda", options)
    assert rule is rules.TORCH_COMPUTE and "90%" in message and "sm90_xmma_gemm" in message


def test_a_kernel_launched_by_aten_is_pytorch_s_whatever_its_name():
    """A solution that defines a dummy kernel under the exact name of the cuBLAS kernel it then runs
    through torch.mm used to be credited with cuBLAS's time. The profiler links every kernel to the op that
    launched it; one launched inside an aten:: op is PyTorch's."""
    from collections import Counter

    from kernelgym.evaluation.profile import _gpu_summary, launched_by_aten

    gemm = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k"
    events = [_event(gemm, "CUDA", 900.0), _event("bias_relu_kernel", "CUDA", 100.0)]
    launch = types.SimpleNamespace
    profiled = [launch(name="aten::mm", kernels=[launch(name=gemm)]), launch(name="aten::empty", kernels=[]),
                launch(name="forward", kernels=[launch(name="bias_relu_kernel")])]
    by_aten = launched_by_aten(profiled)
    assert by_aten == Counter({gemm: 1})
    named_like_cublas = {gemm, "bias_relu_kernel"}
    credited = _gpu_summary(events, own_calls=2, own=named_like_cublas)  # without the links: the old hole
    assert credited["coverage"] == 1.0
    summary = _gpu_summary(events, own_calls=2, own=named_like_cublas, by_aten=by_aten)
    assert summary["own_kernel_ms"] == 0.1 and summary["torch_compute_share"] == 0.9
    assert summary["heavy_ops_called"] == [gemm]
