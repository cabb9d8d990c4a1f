# Idiom: an extension built with torch.utils.cpp_extension.load from a source file the solution writes first (a temp folder, its own PYBIND11_MODULE), inside a try/except that keeps a fallback for a failed build.
# Task: L1/1_ReLU
# Backend: cpp
import os
import tempfile

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

relu_source = r"""
#include <torch/extension.h>

torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const int64_t n = xc.numel();
    #pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] > 0.f ? in[i] : 0.f;
    return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("relu_forward", &relu_forward, "ReLU (CPU)");
}
"""


def build_extension():
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "relu_ext.cpp")
    with open(path, "w") as f:
        f.write(relu_source)
    try:
        return load(name="relu_from_file", sources=[path], extra_cflags=["-O3"], build_directory=folder,
                    verbose=False)
    except Exception as exc:  # a failed build is reported, and the model still runs
        print(f"could not build the extension: {exc}")
        return None


relu_ext = build_extension()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if relu_ext is None:
            return torch.relu(x)
        return relu_ext.relu_forward(x)
