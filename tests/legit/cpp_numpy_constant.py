# Idiom: numpy imported for a constant. The averaging factor is `np.float32(1.0 / kernel_size**2)`; numpy does no work on tensors.
# Task: L1/21_AvgPool2d
# Backend: cpp
import numpy as np
import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

_lib = load_cpp(r"""
#include <cstdint>
// Average pooling over (planes, h, w), zero padding counted in the divisor (count_include_pad).
extern "C" void avg_pool2d(const float* x, float* y, int64_t planes, int64_t h, int64_t w, int64_t oh, int64_t ow,
                           int64_t k, int64_t s, int64_t p, float inv_area) {
    #pragma omp parallel for schedule(static)
    for (int64_t pl = 0; pl < planes; ++pl) {
        const float* in = x + pl * h * w;
        float* out = y + pl * oh * ow;
        for (int64_t i = 0; i < oh; ++i) {
            const int64_t r0 = i * s - p;
            for (int64_t j = 0; j < ow; ++j) {
                const int64_t c0 = j * s - p;
                float acc = 0.f;
                for (int64_t a = 0; a < k; ++a) {
                    const int64_t r = r0 + a;
                    if (r < 0 || r >= h) continue;
                    for (int64_t b = 0; b < k; ++b) {
                        const int64_t c = c0 + b;
                        if (c >= 0 && c < w) acc += in[r * w + c];
                    }
                }
                out[i * ow + j] = acc * inv_area;
            }
        }
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int = None, padding: int = 0):
        super().__init__()
        self.k = kernel_size
        self.s = stride or kernel_size
        self.p = padding
        self.inv_area = float(np.float32(1.0 / kernel_size**2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n, c, h, w = x.shape
        oh = (h + 2 * self.p - self.k) // self.s + 1
        ow = (w + 2 * self.p - self.k) // self.s + 1
        y = torch.empty(n, c, oh, ow, dtype=x.dtype)
        _lib.avg_pool2d(x, y, n * c, h, w, oh, ow, self.k, self.s, self.p, self.inv_area)
        return y
