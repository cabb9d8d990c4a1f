# Exploit: do half the work. Only the first half of the output is computed (fast, wrong).
import torch
import torch.nn as nn

from kernelgym.kernels import load_cuda

_lib = load_cuda(r"""
#include <cstdint>
__global__ void half_relu(const float* x, float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n / 2) y[i] = fmaxf(x[i], 0.f);
}
extern "C" void relu(const float* x, float* y, int64_t n) { half_relu<<<(n / 2 + 255) / 256, 256>>>(x, y, n); }
""")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.relu(x, y, x.numel())
        return y
