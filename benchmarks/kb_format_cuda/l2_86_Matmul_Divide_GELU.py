import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <math.h>
// y[m, n] = epilogue(sum_k x[m, k] * w[n, k] + b[n]); x is (M, K), w is (N, K), both row-major.
#define TILE 64
#define TK 16
__global__ void gemm_div_gelu_kernel(const float* __restrict__ x, const float* __restrict__ w,
                            const float* __restrict__ b, float* __restrict__ y,
                            int M, int N, int K, float inv_divisor) {
    __shared__ float xs[TK][TILE];
    __shared__ float ws[TK][TILE];
    const int t = threadIdx.x;
    const int m0 = blockIdx.y * TILE, n0 = blockIdx.x * TILE;
    const int ty = t / 16, tx = t % 16;
    float acc[4][4] = {{0.f}};
    for (int k0 = 0; k0 < K; k0 += TK) {
        // 64 rows x 16 k of each operand: 1024 values, 4 per thread
        const int row = t / 4, kq = (t % 4) * 4;
        for (int i = 0; i < 4; ++i) {
            const int k = k0 + kq + i;
            xs[kq + i][row] = (m0 + row < M && k < K) ? x[(size_t)(m0 + row) * K + k] : 0.f;
            ws[kq + i][row] = (n0 + row < N && k < K) ? w[(size_t)(n0 + row) * K + k] : 0.f;
        }
        __syncthreads();
        for (int k = 0; k < TK; ++k) {
            float a[4], c[4];
            for (int i = 0; i < 4; ++i) { a[i] = xs[k][ty * 4 + i]; c[i] = ws[k][tx * 4 + i]; }
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * c[j];
        }
        __syncthreads();
    }
    for (int i = 0; i < 4; ++i) {
        const int m = m0 + ty * 4 + i;
        if (m >= M) continue;
        for (int j = 0; j < 4; ++j) {
            const int n = n0 + tx * 4 + j;
            if (n >= N) continue;
            float v = acc[i][j] + b[n];
            v *= inv_divisor;
            v = 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
            y[(size_t)m * N + n] = v;
        }
    }
}

torch::Tensor gemm_div_gelu_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b, double divisor) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && w.is_contiguous(), "gemm_div_gelu: contiguous CUDA tensors");
    const int M = x.size(0), K = x.size(1), N = w.size(0);
    auto y = torch::empty({M, N}, x.options());
    dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    gemm_div_gelu_kernel<<<grid, 256>>>(x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(),
                                 y.data_ptr<float>(), M, N, K, (float)(1.0 / divisor));
    return y;
}
"""


class ModelNew(nn.Module):
    """Linear, divide and exact (erf) GELU fused; the extension is built lazily, on the first forward."""

    def __init__(self, input_size, output_size, divisor):
        super().__init__()
        self.linear = nn.Linear(input_size, output_size)
        self.divisor = divisor
        self._ext = None

    def _kernel(self):
        if self._ext is None:
            self._ext = load_inline(
                name="gemm_div_gelu",
                cpp_sources="torch::Tensor gemm_div_gelu_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b, "
                            "double divisor);",
                cuda_sources=SOURCE, functions=["gemm_div_gelu_cuda"])
        return self._ext

    def forward(self, x):
        return self._kernel().gemm_div_gelu_cuda(x.contiguous(), self.linear.weight, self.linear.bias,
                                                 self.divisor)
