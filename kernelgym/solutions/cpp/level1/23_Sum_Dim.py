import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

# Sum over a middle dimension: the tensor is viewed as (outer, reduce, inner) and, for each outer index,
# rows of `inner` contiguous floats are added into a vector accumulator one after another, so every load is a
# full unit-stride vector. The inner extent is walked in strips of 8 vectors (128 floats with AVX-512) that
# stay in registers for the whole reduction; rows are added in blocks of 8 before joining the running sum,
# which keeps the rounding error near that of a pairwise sum.
_lib = load_cpp(r"""
#include <cstdint>
#include <cstring>

#ifdef __AVX512F__
constexpr int VL = 16;
#else
constexpr int VL = 8;
#endif
typedef float vf __attribute__((vector_size(VL * 4)));
constexpr int STRIP = 8;  // vectors of the inner dimension held in registers at once
constexpr int RB = 8;     // rows summed on their own before joining the running total

static inline vf ld(const float* p) { vf v; std::memcpy(&v, p, sizeof v); return v; }
static inline void st(float* p, vf v) { std::memcpy(p, &v, sizeof v); }

// out[0..w) = sum over r < R of x[r * inner + 0..w), for w <= STRIP * VL (a partial strip is zero padded
// through a small buffer, so the hot loop has no bounds checks).
template <int NV>
static inline void strip_sum(const float* x, float* out, int64_t R, int64_t inner) {
    vf total[NV] = {};
    int64_t r = 0;
    for (; r + RB <= R; r += RB) {
        vf block[NV] = {};
        #pragma GCC unroll 8
        for (int b = 0; b < RB; ++b)
            #pragma GCC unroll 8
            for (int v = 0; v < NV; ++v) block[v] += ld(x + (r + b) * inner + v * VL);
        #pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) total[v] += block[v];
    }
    vf rest[NV] = {};
    for (; r < R; ++r)
        #pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) rest[v] += ld(x + r * inner + v * VL);
    #pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) st(out + v * VL, total[v] + rest[v]);
}

extern "C" void sum_middle(const float* x, float* y, int64_t outer, int64_t R, int64_t inner) {
    const int64_t SW = STRIP * VL;
    const int64_t strips = (inner + SW - 1) / SW;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int64_t o = 0; o < outer; ++o) {
        for (int64_t s = 0; s < strips; ++s) {
            const float* base = x + o * R * inner + s * SW;
            float* out = y + o * inner + s * SW;
            const int64_t w = inner - s * SW < SW ? inner - s * SW : SW;
            if (w == SW) {
                strip_sum<STRIP>(base, out, R, inner);
            } else {  // the last, narrower strip: whole vectors first, then the ragged lanes one by one
                const int64_t nv = w / VL;
                float buf[STRIP * VL];
                switch (nv) {
                    case 7: strip_sum<7>(base, buf, R, inner); break;
                    case 6: strip_sum<6>(base, buf, R, inner); break;
                    case 5: strip_sum<5>(base, buf, R, inner); break;
                    case 4: strip_sum<4>(base, buf, R, inner); break;
                    case 3: strip_sum<3>(base, buf, R, inner); break;
                    case 2: strip_sum<2>(base, buf, R, inner); break;
                    case 1: strip_sum<1>(base, buf, R, inner); break;
                    default: break;
                }
                std::memcpy(out, buf, sizeof(float) * nv * VL);
                for (int64_t j = nv * VL; j < w; ++j) {
                    float acc = 0.0f;
                    for (int64_t r = 0; r < R; ++r) acc += base[r * inner + j];
                    out[j] = acc;
                }
            }
        }
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        d = self.dim % x.dim()
        outer = 1
        for s in x.shape[:d]:
            outer *= s
        inner = x.numel() // (outer * x.shape[d])
        shape = list(x.shape)
        shape[d] = 1
        y = torch.empty(shape, dtype=x.dtype)
        _lib.sum_middle(x, y, outer, x.shape[d], inner)
        return y
