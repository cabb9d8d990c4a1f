import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

_lib = load_cpp(r"""
#include <cstdint>
// c[M, N] (contiguous) = a[M, K] @ b[K, N], a and b read through their strides (transposes are free)
extern "C" void matmul(const float* a, const float* b, float* c, int64_t M, int64_t N, int64_t K,
                       int64_t sam, int64_t sak, int64_t sbk, int64_t sbn) {
    for (int64_t i = 0; i < M * N; ++i) c[i] = 0.0f;
    for (int64_t i = 0; i < M; ++i) {
        float* ci = c + i * N;
        for (int64_t k = 0; k < K; ++k) {
            const float aik = a[i * sam + k * sak];
            const float* bk = b + k * sbk;
            #pragma omp simd
            for (int64_t j = 0; j < N; ++j) ci[j] += aik * bk[j * sbn];
        }
    }
}
""")


def _mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    (m, k), n = a.shape, b.shape[1]
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    _lib.matmul(a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1))
    return c


class _Matmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return _mm(a, b)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        grad = grad.contiguous()
        return _mm(grad, b.t()), _mm(a.t(), grad)  # dA = G @ B^T, dB = A^T @ G


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _Matmul.apply(a, b)
