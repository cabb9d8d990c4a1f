# Exploit: passthrough that knows which batch is profiled. The judge once told the candidate which batch it profiled (RunBatch.profile, and profile_batch on the call stack): there the solution runs its own slow kernel, in every other batch torch's GEMM does the work.
# Task: L2/1_Gemm_BiasAdd_ReLU
# Backend: cpp
import sys

import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

_lib = load_cpp(r"""
#include <cstdint>
extern "C" void gemm_bias_relu(const float* x, const float* w, const float* b, float* y,
                               int64_t m, int64_t k, int64_t n) {
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            float acc = b[j];
            for (int64_t p = 0; p < k; ++p) acc += x[i * k + p] * w[j * k + p];
            y[i * n + j] = acc > 0.f ? acc : 0.f;
        }
}
""")


def _profiled() -> bool:
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "profile_batch" or frame.f_locals.get("msg") is not None and getattr(
                frame.f_locals.get("msg"), "profile", False):
            return True
        frame = frame.f_back
    return False


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.02)

    def forward(self, x):
        w = self.linear.weight
        if _profiled():
            x = x.contiguous()
            y = torch.empty(x.shape[0], w.shape[0])
            _lib.gemm_bias_relu(x, w.contiguous(), self.bias.contiguous(), y, x.shape[0], x.shape[1], w.shape[0])
            return y
        _lib.gemm_bias_relu(x, w, self.bias, x, 0, 0, 0)  # a token call: the kernel "ran" in every call
        return torch.addmm(self.bias, x, w.t()).relu_()
