import torch
from torch import nn

from kernelgym.kernels import load_cpp

_lib = load_cpp(r"""
#include <cstdint>
extern "C" void clamp_scale(const float* x, float* y, int64_t n, float limit, float gain) {
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i] < -limit ? -limit : (x[i] > limit ? limit : x[i]);
        y[i] = v * gain;
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, limit: float, gain: float):
        super().__init__()
        self.limit = limit
        self.gain = gain

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.clamp_scale(x, y, x.numel(), self.limit, self.gain)
        return y
