# Idiom: one kernel function kept as an attribute. `self.kernel = lib.elu_forward` in __init__, called as `self.kernel(...)`.
# Task: L1/13_ELU
# Backend: cpp
import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

lib = load_cpp(r"""
#include <cstdint>
#include <cstring>

static inline float exp_fast(float x) {  // x <= 0 here; 2^n * 2^f, f in [-1/2, 1/2]
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

extern "C" void elu_forward(const float* x, float* y, int64_t n, float alpha) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        y[i] = v > 0.f ? v : alpha * (exp_fast(v < 0.f ? v : 0.f) - 1.f);
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha
        self.kernel = lib.elu_forward

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        self.kernel(x, y, x.numel(), float(self.alpha))
        return y
