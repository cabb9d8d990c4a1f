# Idiom: a -D define passed to the lean builder. `load_cpp(src, extra_flags=["-DUNROLL=4"])` sets the unroll factor the source reads from a macro.
# Task: L1/29_ReverseCumsum
# Backend: cpp
import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

_SOURCE = r"""
#include <cstdint>
#ifndef UNROLL
#define UNROLL 1
#endif
// Suffix sums of each row: UNROLL rows are scanned together (independent chains keep the adder busy).
extern "C" void reverse_cumsum_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    const int64_t grouped = rows / UNROLL * UNROLL;
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < grouped; r += UNROLL) {
        float acc[UNROLL] = {};
        for (int64_t c = cols - 1; c >= 0; --c) {
            #pragma GCC unroll 16
            for (int u = 0; u < UNROLL; ++u) {
                acc[u] += x[(r + u) * cols + c];
                y[(r + u) * cols + c] = acc[u];
            }
        }
    }
    for (int64_t r = grouped; r < rows; ++r) {
        float acc = 0.f;
        for (int64_t c = cols - 1; c >= 0; --c) { acc += x[r * cols + c]; y[r * cols + c] = acc; }
    }
}
"""

_lib = load_cpp(_SOURCE, extra_flags=["-DUNROLL=4"])


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.reverse_cumsum_rows(x, y, x.shape[0], x.shape[1])
        return y
