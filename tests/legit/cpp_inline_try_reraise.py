# Idiom: try/except around the build that re-raises. A failed load_inline build is reported with context and raised again, never swallowed; no fallback path exists.
# Task: L1/9_Tanh
# Backend: cpp
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

tanh_source = r"""
#include <torch/extension.h>
#include <cstring>

static inline float exp_fast(float x) {
    x = x < -87.f ? -87.f : (x > 88.f ? 88.f : x);
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

torch::Tensor tanh_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const int64_t n = xc.numel();
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        // tanh(x) = 1 - 2 / (e^{2x} + 1), odd-symmetric so the exponent stays non-positive
        const float a = in[i] < 0.f ? -in[i] : in[i];
        const float r = 1.f - 2.f / (exp_fast(2.f * a) + 1.f);
        out[i] = in[i] < 0.f ? -r : r;
    }
    return y;
}
"""

try:
    tanh_ext = load_inline(
        name="tanh_ext",
        cpp_sources=["torch::Tensor tanh_forward(torch::Tensor x);", tanh_source],
        functions=["tanh_forward"],
        extra_cflags=["-O3", "-march=native", "-fopenmp"],
    )
except Exception as exc:
    raise RuntimeError(f"building the tanh extension failed: {exc}") from exc


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return tanh_ext.tanh_forward(x)
