# Idiom: a `__main__` self-test block. The module ends with `if __name__ == "__main__":` comparing against torch.cumsum, which never runs under the judge.
# Task: L1/27_Cumsum
# Backend: cpp
import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

_lib = load_cpp(r"""
#include <cstdint>
// Inclusive scan of each row of a (rows, cols) matrix; rows are independent.
extern "C" void cumsum_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* in = x + r * cols;
        float* out = y + r * cols;
        float acc = 0.f;
        for (int64_t c = 0; c < cols; ++c) { acc += in[c]; out[c] = acc; }
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.cumsum_rows(x, y, x.shape[0], x.shape[1])
        return y


if __name__ == "__main__":
    sample = torch.randn(4, 1000) / 30
    print("max error:", (ModelNew(1)(sample) - torch.cumsum(sample, dim=1)).abs().max().item())
