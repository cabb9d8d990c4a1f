import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

# Inclusive prefix sum along contiguous rows. Each vector of VL elements is scanned in registers with
# log2(VL) shift-and-add steps (lane i gains lane i - s for s = 1, 2, 4, ...), then the running total of the
# row so far is added and the new total is the broadcast of the last lane. That carry is the only serial
# dependency, so four rows are scanned side by side to keep the core busy.
_lib = load_cpp(r"""
#include <cstdint>
#include <cstring>

#ifdef __AVX512F__
constexpr int VL = 16;
#else
constexpr int VL = 8;
#endif
typedef float vf __attribute__((vector_size(VL * 4)));
typedef int32_t vi __attribute__((vector_size(VL * 4)));
constexpr int ROWS = 4;  // rows scanned together

static inline vf ld(const float* p) { vf v; std::memcpy(&v, p, sizeof v); return v; }
static inline void st(float* p, vf v) { std::memcpy(p, &v, sizeof v); }

// lanes shifted up by S, zeros shifted in.
template <int S>
static inline vf shift_up(vf v) {
    vi idx;
    for (int l = 0; l < VL; ++l) idx[l] = l >= S ? l - S : VL;  // VL picks lane 0 of the zero vector
    return __builtin_shuffle(v, vf{}, idx);
}

static inline vf scan_vector(vf v) {
    v += shift_up<1>(v);
    v += shift_up<2>(v);
    v += shift_up<4>(v);
    if constexpr (VL == 16) v += shift_up<8>(v);
    return v;
}

static inline vf last_lane(vf v) { return __builtin_shuffle(v, vi{} + (VL - 1)); }

// Scan R rows of length n (stride ld_) at once; the tail past the last whole vector goes one at a time.
template <int R>
static void scan_rows(const float* x, float* y, int64_t n, int64_t ld_) {
    vf carry[R] = {};
    const int64_t nv = n / VL * VL;
    for (int64_t j = 0; j < nv; j += VL) {
        #pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            const vf s = scan_vector(ld(x + r * ld_ + j)) + carry[r];
            st(y + r * ld_ + j, s);
            carry[r] = last_lane(s);
        }
    }
    for (int r = 0; r < R; ++r) {
        float acc = carry[r][0];
        for (int64_t j = nv; j < n; ++j) { acc += x[r * ld_ + j]; y[r * ld_ + j] = acc; }
    }
}

extern "C" void cumsum_rows(const float* x, float* y, int64_t rows, int64_t n) {
    const int64_t groups = rows / ROWS;
    #pragma omp parallel for schedule(static)
    for (int64_t g = 0; g < groups; ++g) scan_rows<ROWS>(x + g * ROWS * n, y + g * ROWS * n, n, n);
    for (int64_t r = groups * ROWS; r < rows; ++r) scan_rows<1>(x + r * n, y + r * n, n, n);
}
""")


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The scanned dimension is made the last, contiguous one (a no-op for the task's 2-D input, dim=1).
        xt = x.movedim(self.dim, -1).contiguous()
        y = torch.empty_like(xt)
        n = xt.shape[-1]
        _lib.cumsum_rows(xt, y, xt.numel() // n, n)
        return y.movedim(-1, self.dim)
