# Idiom: a scratch buffer allocated lazily and kept on self. The per-chunk partial sums live in `self._partials`, allocated on the first call (and regrown if a bigger input comes) and reused afterwards.
# Task: L1/30_MSELoss
# Backend: cpp
import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

CHUNK = 8192

_lib = load_cpp(r"""
#include <cstdint>
extern "C" void squared_error_partials(const float* p, const float* t, double* partials, int64_t n, int64_t chunk) {
    const int64_t chunks = (n + chunk - 1) / chunk;
    #pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
        const int64_t lo = c * chunk, hi = lo + chunk < n ? lo + chunk : n;
        float s = 0.f;
        #pragma omp simd reduction(+:s)
        for (int64_t i = lo; i < hi; ++i) { const float d = p[i] - t[i]; s += d * d; }
        partials[c] = s;
    }
}
extern "C" void mean_of_partials(const double* partials, int64_t chunks, int64_t n, float* out) {
    double s = 0.0;
    for (int64_t c = 0; c < chunks; ++c) s += partials[c];
    out[0] = static_cast<float>(s / n);
}
""")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._partials = None

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        p = predictions.contiguous()
        t = targets.contiguous()
        n = p.numel()
        chunks = (n + CHUNK - 1) // CHUNK
        if self._partials is None or self._partials.numel() < chunks:
            self._partials = torch.empty(chunks, dtype=torch.float64)
        out = torch.empty((), dtype=p.dtype)
        _lib.squared_error_partials(p, t, self._partials, n, CHUNK)
        _lib.mean_of_partials(self._partials, chunks, n, out)
        return out
