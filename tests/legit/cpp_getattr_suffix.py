# Idiom: the kernel picked by a built name. `getattr(lib, "log_softmax_" + suffix)` chooses the specialization for the row length (a multiple of 16 or not).
# Task: L1/11_LogSoftmax
# Backend: cpp
import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

lib = load_cpp(r"""
#include <cmath>
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

template <int64_t STEP>
static void log_softmax(const float* x, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* in = x + r * cols;
        float* out = y + r * cols;
        float m = in[0];
        #pragma omp simd reduction(max:m) simdlen(STEP)
        for (int64_t c = 0; c < cols; ++c) m = in[c] > m ? in[c] : m;
        float s = 0.f;
        #pragma omp simd reduction(+:s) simdlen(STEP)
        for (int64_t c = 0; c < cols; ++c) s += exp_fast(in[c] - m);
        const float shift = m + std::log(s);
        #pragma omp simd simdlen(STEP)
        for (int64_t c = 0; c < cols; ++c) out[c] = in[c] - shift;
    }
}

extern "C" void log_softmax_aligned(const float* x, float* y, int64_t rows, int64_t cols) { log_softmax<16>(x, y, rows, cols); }
extern "C" void log_softmax_generic(const float* x, float* y, int64_t rows, int64_t cols) { log_softmax<8>(x, y, rows, cols); }
""")


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        suffix = "aligned" if x.shape[-1] % 16 == 0 else "generic"
        kernel = getattr(lib, "log_softmax_" + suffix)
        kernel(x, y, x.numel() // x.shape[-1], x.shape[-1])
        return y
