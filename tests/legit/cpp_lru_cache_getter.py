# Idiom: the builder behind an lru_cache getter. `_kernels()` builds the library on first use and returns the cached one afterwards.
# Task: L1/25_Max_Dim
# Backend: cpp
import functools

import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

_SOURCE = r"""
#include <cstdint>
// x is (outer, r, inner): max over r, vectorized across the contiguous inner dimension.
extern "C" void amax_middle(const float* x, float* y, int64_t outer, int64_t r, int64_t inner) {
    #pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer; ++o) {
        float* out = y + o * inner;
        const float* base = x + o * r * inner;
        #pragma omp simd
        for (int64_t j = 0; j < inner; ++j) out[j] = base[j];
        for (int64_t k = 1; k < r; ++k) {
            const float* row = base + k * inner;
            #pragma omp simd
            for (int64_t j = 0; j < inner; ++j) out[j] = row[j] > out[j] ? row[j] : out[j];
        }
    }
}
"""


@functools.lru_cache(maxsize=None)
def _kernels():
    return load_cpp(_SOURCE)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim
        _kernels()  # build at construction, not in the first timed call

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        dim = self.dim % x.dim()
        shape = list(x.shape)
        r = shape.pop(dim)
        outer = 1
        for s in shape[:dim]:
            outer *= s
        inner = x.numel() // (outer * r)
        y = torch.empty(shape, dtype=x.dtype)
        _kernels().amax_middle(x, y, outer, r, inner)
        return y
