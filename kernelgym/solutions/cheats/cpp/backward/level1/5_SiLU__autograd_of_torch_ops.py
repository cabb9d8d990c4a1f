# Exploit: the forward's value comes from the solution's kernel, but autograd differentiates a PyTorch copy
# of the forward attached with a zero-valued term: the whole backward is PyTorch's.
import torch
import torch.nn as nn
import torch.nn.functional as F

from kernelgym.kernels import load_cpp

_lib = load_cpp(r"""
#include <cmath>
#include <cstdint>
extern "C" void silu_forward(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));
}
""")


class ModelNew(nn.Module):
    def forward(self, x):
        x_in = x.detach().contiguous()
        y = torch.empty_like(x_in)
        _lib.silu_forward(x_in, y, x_in.numel())
        shadow = F.silu(x)
        return y + (shadow - shadow.detach())
