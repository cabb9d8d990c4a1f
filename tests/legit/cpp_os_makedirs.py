# Idiom: os.makedirs for a build folder. The module makes a folder under the temp directory and saves its kernel source there for inspection before building it.
# Task: L1/22_MaxPool1d
# Backend: cpp
import os
import tempfile

import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

SOURCE = r"""
#include <cstdint>
#include <limits>
extern "C" void max_pool1d(const float* x, float* y, int64_t planes, int64_t length, int64_t out_len,
                           int64_t k, int64_t s, int64_t p, int64_t d) {
    #pragma omp parallel for schedule(static)
    for (int64_t pl = 0; pl < planes; ++pl) {
        const float* in = x + pl * length;
        float* out = y + pl * out_len;
        // windows wholly inside the row need no bounds checks (and vectorize); the edges keep them
        const int64_t lo = (p + s - 1) / s;
        int64_t hi = (length - 1 + p - (k - 1) * d) / s + 1;
        hi = hi < out_len ? hi : out_len;
        for (int64_t o = 0; o < out_len; ++o) {
            if (o == lo && lo < hi) {
                for (int64_t q = lo; q < hi; ++q) out[q] = in[q * s - p];
                for (int64_t j = 1; j < k; ++j) {
                    const float* tap = in - p + j * d;
                    for (int64_t q = lo; q < hi; ++q) out[q] = tap[q * s] > out[q] ? tap[q * s] : out[q];
                }
                o = hi - 1;
                continue;
            }
            float m = -std::numeric_limits<float>::infinity();
            for (int64_t j = 0; j < k; ++j) {
                const int64_t i = o * s - p + j * d;
                if (i >= 0 && i < length && in[i] > m) m = in[i];
            }
            out[o] = m;
        }
    }
}
"""

BUILD_DIR = os.path.join(tempfile.gettempdir(), "maxpool1d_build")
os.makedirs(BUILD_DIR, exist_ok=True)
with open(os.path.join(BUILD_DIR, "max_pool1d.cpp"), "w") as f:
    f.write(SOURCE)
_lib = load_cpp(SOURCE)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int = None, padding: int = 0, dilation: int = 1):
        super().__init__()
        self.k, self.s, self.p, self.d = kernel_size, stride or kernel_size, padding, dilation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n, c, length = x.shape
        out_len = (length + 2 * self.p - self.d * (self.k - 1) - 1) // self.s + 1
        y = torch.empty(n, c, out_len, dtype=x.dtype)
        _lib.max_pool1d(x, y, n * c, length, out_len, self.k, self.s, self.p, self.d)
        return y
