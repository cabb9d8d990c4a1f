# Idiom: load_inline binding through its own PYBIND11_MODULE. The source declares the module itself and load_inline gets no functions= list; the output comes from torch::empty_like in the wrapper.
# Task: L1/8_Sigmoid
# Backend: cpp
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>
#include <cstring>

// exp(x) for x in [-87, 88]: 2^n * 2^f with f in [-1/2, 1/2] from a degree-5 fit; written without calls so
// the loop below vectorizes.
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

torch::Tensor sigmoid_forward(torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "float32 only");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const int64_t n = xc.numel();
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = 1.f / (1.f + exp_fast(-in[i]));
    return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("forward", &sigmoid_forward, "sigmoid (CPU)");
}
"""

sigmoid_ext = load_inline(name="sigmoid_ext", cpp_sources=source, extra_cflags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sigmoid_ext.forward(x)
