# Idiom: the kernel inside a sub-module. A small nn.Module (`RowSoftmax`) owns the native call; ModelNew holds it as `self.softmax` and calls it.
# Task: L1/10_Softmax
# Backend: cpp
import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

_softmax_lib = load_cpp(r"""
#include <cstdint>
#include <cstring>

static inline float exp_fast(float x) {  // x <= 0 here
    x = x < -87.f ? -87.f : x;
    const float t = x * 1.44269504088896341f;
    const float n = (t + 12582912.f) - 12582912.f;
    const float f = t - n;
    float p = 1.32767076e-3f;
    p = p * f + 9.67150927e-3f;
    p = p * f + 5.55069260e-2f;
    p = p * f + 2.40222424e-1f;
    p = p * f + 6.93147004e-1f;
    p = p * f + 1.f;
    const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* in = x + r * cols;
        float* out = y + r * cols;
        float m = in[0];
        #pragma omp simd reduction(max:m)
        for (int64_t c = 0; c < cols; ++c) m = in[c] > m ? in[c] : m;
        float s = 0.f;
        #pragma omp simd reduction(+:s)
        for (int64_t c = 0; c < cols; ++c) { out[c] = exp_fast(in[c] - m); s += out[c]; }
        const float k = 1.f / s;
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) out[c] *= k;
    }
}
""")


class RowSoftmax(nn.Module):
    """Softmax over the last dimension of a 2-D tensor, in one native pass per row."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        _softmax_lib.softmax_rows(x, y, x.shape[0], x.shape[1])
        return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.softmax = RowSoftmax()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.softmax(x)
