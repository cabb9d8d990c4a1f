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
