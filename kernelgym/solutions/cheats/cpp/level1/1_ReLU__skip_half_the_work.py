# Exploit: do half the work. Only the first half of the output is computed (fast, wrong).
import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

_lib = load_cpp(r"""
#include <cstdint>
extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n / 2; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
    for (int64_t i = n / 2; i < n; ++i) y[i] = 0.f;
}
""")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.relu(x, y, x.numel())
        return y
