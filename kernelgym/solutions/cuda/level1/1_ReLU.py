import torch
import torch.nn as nn

from kernelgym.kernels import load_cuda

_lib = load_cuda(r"""
#include <cstdint>
__global__ void relu_kernel(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
        float4 v = x[i];
        v.x = fmaxf(v.x, 0.f); v.y = fmaxf(v.y, 0.f); v.z = fmaxf(v.z, 0.f); v.w = fmaxf(v.w, 0.f);
        y[i] = v;
    }
}
__global__ void relu_tail(const float* x, float* y, int64_t start, int64_t n) {
    int64_t i = start + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f);
}
extern "C" void relu(const float* x, float* y, int64_t n) {
    int64_t n4 = n / 4;
    if (n4 > 0) relu_kernel<<<132 * 8, 256>>>((const float4*)x, (float4*)y, n4);
    if (n % 4) relu_tail<<<1, 4>>>(x, y, n4 * 4, n);
}
""")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.relu(x, y, x.numel())
        return y
