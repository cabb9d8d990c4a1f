# Idiom: a precision flag set to full precision. `torch.backends.cuda.matmul.allow_tf32 = False` at import (a habit from GPU code), then a plain CPU kernel.
# Task: L1/20_MaxPool2d
# Backend: cpp
import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

_lib = load_cpp(r"""
#include <cstdint>
#include <limits>
extern "C" void max_pool2d(const float* x, float* y, int64_t planes, int64_t h, int64_t w, int64_t oh, int64_t ow,
                           int64_t k, int64_t s, int64_t p) {
    #pragma omp parallel for schedule(static)
    for (int64_t pl = 0; pl < planes; ++pl) {
        const float* in = x + pl * h * w;
        float* out = y + pl * oh * ow;
        for (int64_t i = 0; i < oh; ++i) {
            for (int64_t j = 0; j < ow; ++j) {
                float m = -std::numeric_limits<float>::infinity();
                for (int64_t a = 0; a < k; ++a) {
                    const int64_t r = i * s - p + a;
                    if (r < 0 || r >= h) continue;
                    for (int64_t b = 0; b < k; ++b) {
                        const int64_t c = j * s - p + b;
                        if (c >= 0 && c < w && in[r * w + c] > m) m = in[r * w + c];
                    }
                }
                out[i * ow + j] = m;
            }
        }
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int = None, padding: int = 0):
        super().__init__()
        self.k, self.s, self.p = kernel_size, stride or kernel_size, padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n, c, h, w = x.shape
        oh = (h + 2 * self.p - self.k) // self.s + 1
        ow = (w + 2 * self.p - self.k) // self.s + 1
        y = torch.empty(n, c, oh, ow, dtype=x.dtype)
        _lib.max_pool2d(x, y, n * c, h, w, oh, ow, self.k, self.s, self.p)
        return y
