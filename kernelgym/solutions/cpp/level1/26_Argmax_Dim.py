import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

# Argmax along contiguous rows. Each vector lane keeps the best value it has seen and that value's index
# (a strict > update, so within a lane the first occurrence wins); at the end of the row the lanes are merged,
# taking the larger value and, on a tie, the smaller index, which reproduces PyTorch's first-maximum rule.
# NaN counts as the maximum, as in PyTorch: the first NaN of a row is its answer.
_lib = load_cpp(r"""
#include <cmath>
#include <cstdint>
#include <cstring>

#ifdef __AVX512F__
constexpr int VL = 16;
#else
constexpr int VL = 8;
#endif
typedef float vf __attribute__((vector_size(VL * 4)));
typedef int32_t vi __attribute__((vector_size(VL * 4)));

static inline vf ld(const float* p) { vf v; std::memcpy(&v, p, sizeof v); return v; }

// Lane-wise merge of two (value, index) candidates: the larger value, on a tie the smaller index.
static inline void merge(vf& v, vi& i, vf pv, vi pi) {
    const vi take = (pv > v) | ((pv == v) & (pi < i));
    v = take ? pv : v;
    i = take ? pi : i;
}

template <int S>
static inline vi rotate_idx() {
    vi idx;
    for (int l = 0; l < VL; ++l) idx[l] = (l + S) % VL;
    return idx;
}

template <int S>
static inline void fold(vf& v, vi& i) {  // after folds S = VL/2, ..., 1, every lane holds the row's answer
    merge(v, i, __builtin_shuffle(v, rotate_idx<S>()), __builtin_shuffle(i, rotate_idx<S>()));
}

static int64_t first_nan(const float* in, int64_t n) {
    for (int64_t j = 0; j < n; ++j)
        if (std::isnan(in[j])) return j;
    return -1;
}

static int64_t row_argmax(const float* in, int64_t n) {
    const int64_t nv = n / VL * VL;
    if (nv == 0 || n >= (int64_t(1) << 31)) {  // short (or huge) rows: plain scalar scan
        const int64_t nan_at = first_nan(in, n);
        if (nan_at >= 0) return nan_at;
        int64_t best_i = 0;
        for (int64_t j = 1; j < n; ++j)
            if (in[j] > in[best_i]) best_i = j;
        return best_i;
    }
    vi lane;
    for (int l = 0; l < VL; ++l) lane[l] = l;
    // two independent candidate sets (even and odd vectors) halve the serial compare-and-select chain
    vf b0 = ld(in), b1 = b0;
    vi i0 = lane, i1 = lane, nan_seen = b0 != b0;
    int64_t j = VL;
    for (; j + 2 * VL <= nv; j += 2 * VL) {
        const vf v0 = ld(in + j), v1 = ld(in + j + VL);
        const vi t0 = v0 > b0, t1 = v1 > b1;
        b0 = t0 ? v0 : b0;
        i0 = t0 ? lane + (int32_t)j : i0;
        b1 = t1 ? v1 : b1;
        i1 = t1 ? lane + (int32_t)(j + VL) : i1;
        nan_seen |= (v0 != v0) | (v1 != v1);
    }
    for (; j < nv; j += VL) {
        const vf v0 = ld(in + j);
        const vi t0 = v0 > b0;
        b0 = t0 ? v0 : b0;
        i0 = t0 ? lane + (int32_t)j : i0;
        nan_seen |= v0 != v0;
    }
    merge(b0, i0, b1, i1);
    if constexpr (VL == 16) fold<8>(b0, i0);
    fold<4>(b0, i0);
    fold<2>(b0, i0);
    fold<1>(b0, i0);
    float best = b0[0];
    int64_t best_i = i0[0];
    bool any_nan = false;
    for (int l = 0; l < VL; ++l) any_nan |= nan_seen[l] != 0;
    for (int64_t t = nv; t < n; ++t) {  // the tail comes after every vector element, so > keeps the first
        any_nan |= std::isnan(in[t]);
        if (in[t] > best) { best = in[t]; best_i = t; }
    }
    return any_nan ? first_nan(in, n) : best_i;
}

extern "C" void argmax_rows(const float* x, int64_t* out, int64_t rows, int64_t n) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) out[r] = row_argmax(x + r * n, n);
}
""")


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The reduced dimension is made the last, contiguous one (a no-op for the task's last-dim argmax).
        xt = x.movedim(self.dim, -1).contiguous()
        n = xt.shape[-1]
        out = torch.empty(xt.shape[:-1], dtype=torch.int64)
        _lib.argmax_rows(xt, out, xt.numel() // n, n)
        return out
