# Idiom: KernelBench's few-shot layout. load_inline with functions=[...], the extension kept as `self.op` and called as `self.op.leaky_relu_cpu(x)`, the output allocated by torch::zeros_like in the C++ wrapper.
# Task: L1/12_LeakyReLU
# Backend: cpp
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

leaky_relu_source = r"""
#include <torch/extension.h>

torch::Tensor leaky_relu_cpu(torch::Tensor x, double negative_slope) {
    auto xc = x.contiguous();
    auto out = torch::zeros_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const float slope = static_cast<float>(negative_slope);
    const int64_t n = xc.numel();
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.f ? in[i] : in[i] * slope;
    return out;
}
"""

leaky_relu_cpp_source = "torch::Tensor leaky_relu_cpu(torch::Tensor x, double negative_slope);"

leaky_relu = load_inline(
    name="leaky_relu",
    cpp_sources=[leaky_relu_cpp_source + leaky_relu_source],
    functions=["leaky_relu_cpu"],
    extra_cflags=["-O3", "-march=native", "-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.op = leaky_relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.op.leaky_relu_cpu(x, self.negative_slope)
