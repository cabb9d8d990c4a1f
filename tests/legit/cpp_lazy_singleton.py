# Idiom: a lazy global singleton. `_get_lib()` builds the library into a module global on first use (`global _LIB`), later calls reuse it.
# Task: L1/28_Cumprod
# Backend: cpp
import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

_LIB = None

_SOURCE = r"""
#include <cstdint>
// Running product of each row; four rows advance together so four multiply chains overlap.
extern "C" void cumprod_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    const int64_t r4 = rows / 4 * 4;
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < r4; r += 4) {
        float a0 = 1.f, a1 = 1.f, a2 = 1.f, a3 = 1.f;
        const float *x0 = x + r * cols, *x1 = x0 + cols, *x2 = x1 + cols, *x3 = x2 + cols;
        float *y0 = y + r * cols, *y1 = y0 + cols, *y2 = y1 + cols, *y3 = y2 + cols;
        for (int64_t c = 0; c < cols; ++c) {
            a0 *= x0[c]; a1 *= x1[c]; a2 *= x2[c]; a3 *= x3[c];
            y0[c] = a0; y1[c] = a1; y2[c] = a2; y3[c] = a3;
        }
    }
    for (int64_t r = r4; r < rows; ++r) {
        float a = 1.f;
        for (int64_t c = 0; c < cols; ++c) { a *= x[r * cols + c]; y[r * cols + c] = a; }
    }
}
"""


def _get_lib():
    global _LIB
    if _LIB is None:
        _LIB = load_cpp(_SOURCE)
    return _LIB


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        _get_lib().cumprod_rows(x, y, x.shape[0], x.shape[1])
        return y
