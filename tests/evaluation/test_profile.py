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
