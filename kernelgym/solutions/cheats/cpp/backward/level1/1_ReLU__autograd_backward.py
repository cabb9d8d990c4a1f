# Exploit: the backward left to PyTorch. The forward runs the solution's kernel; the gradient is PyTorch ops.
import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

_lib = load_cpp(r"""
#include <cstdint>
extern "C" void relu_forward(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
""")


class _ReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.relu_forward(x, y, x.numel())
        ctx.save_for_backward(x)
        return y

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (x > 0)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ReLU.apply(x)
