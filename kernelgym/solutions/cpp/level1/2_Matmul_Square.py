import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

# C = A @ B for row-major fp32 matrices, blocked for the caches and the registers:
#  * K is cut into blocks of KC; for each block, B[k0:k0+KC, :] is copied into panels of NR = 2 vectors of
#    columns (k-major, zero padded past N), so one panel (KC x NR floats, 32 KB) stays in L1 while it is used;
#  * a register tile is MR = 8 rows x NR columns: 16 vector accumulators, fed per k by two panel loads and
#    eight broadcasts of A (read in place: each of the 8 rows is a unit-stride stream over k);
#  * the first K block stores its tiles, later blocks add into C. Tiles at the right or bottom edge go
#    through a small buffer, so the hot loop never checks bounds.
_lib = load_cpp(r"""
#include <cstdint>
#include <cstdlib>
#include <cstring>

#ifdef __AVX512F__
constexpr int VL = 16;
#else
constexpr int VL = 8;
#endif
typedef float vf __attribute__((vector_size(VL * 4)));
constexpr int MR = 8;        // rows of A per register tile
constexpr int NR = 2 * VL;   // columns of B per register tile
constexpr int64_t KC = 256;  // depth of one K block

static inline vf ld(const float* p) { vf v; std::memcpy(&v, p, sizeof v); return v; }
static inline void st(float* p, vf v) { std::memcpy(p, &v, sizeof v); }

// panel[k * NR + c] = B[(k0 + k) * N + j0 + c] for k < kc, c < NR (zero where j0 + c >= N).
static void pack_panel(const float* B, float* panel, int64_t N, int64_t k0, int64_t kc, int64_t j0) {
    const int64_t cols = N - j0 < NR ? N - j0 : NR;
    for (int64_t k = 0; k < kc; ++k) {
        const float* src = B + (k0 + k) * N + j0;
        float* dst = panel + k * NR;
        if (cols == NR) {
            st(dst, ld(src));
            st(dst + VL, ld(src + VL));
        } else {
            for (int64_t c = 0; c < NR; ++c) dst[c] = c < cols ? src[c] : 0.0f;
        }
    }
}

// ROWS x NR tile of A[:, k0:k0+kc] @ panel into c (ldc), stored (accumulate == false) or added.
template <int ROWS>
static inline void tile(const float* A, int64_t lda, const float* panel, int64_t kc, float* c, int64_t ldc,
                        bool accumulate) {
    vf c0[ROWS], c1[ROWS];
    #pragma GCC unroll 8
    for (int r = 0; r < ROWS; ++r) { c0[r] = vf{}; c1[r] = vf{}; }
    for (int64_t k = 0; k < kc; ++k) {
        const vf b0 = ld(panel + k * NR), b1 = ld(panel + k * NR + VL);
        #pragma GCC unroll 8
        for (int r = 0; r < ROWS; ++r) {
            const float a = A[r * lda + k];
            c0[r] += a * b0;
            c1[r] += a * b1;
        }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < ROWS; ++r) {
        float* row = c + r * ldc;
        if (accumulate) { c0[r] += ld(row); c1[r] += ld(row + VL); }
        st(row, c0[r]);
        st(row + VL, c1[r]);
    }
}

static void tile_rows(int rows, const float* A, int64_t lda, const float* panel, int64_t kc, float* c,
                      int64_t ldc, bool accumulate) {
    switch (rows) {
        case 8: tile<8>(A, lda, panel, kc, c, ldc, accumulate); break;
        case 7: tile<7>(A, lda, panel, kc, c, ldc, accumulate); break;
        case 6: tile<6>(A, lda, panel, kc, c, ldc, accumulate); break;
        case 5: tile<5>(A, lda, panel, kc, c, ldc, accumulate); break;
        case 4: tile<4>(A, lda, panel, kc, c, ldc, accumulate); break;
        case 3: tile<3>(A, lda, panel, kc, c, ldc, accumulate); break;
        case 2: tile<2>(A, lda, panel, kc, c, ldc, accumulate); break;
        default: tile<1>(A, lda, panel, kc, c, ldc, accumulate); break;
    }
}

extern "C" void matmul(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N) {
    const int64_t panels = (N + NR - 1) / NR;
    const int64_t mtiles = (M + MR - 1) / MR;
    float* packed = (float*)std::aligned_alloc(64, (size_t)(KC * NR * panels * sizeof(float)));
    if (K == 0) std::memset(C, 0, sizeof(float) * M * N);
    #pragma omp parallel
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
        const int64_t kc = K - k0 < KC ? K - k0 : KC;
        #pragma omp for schedule(static)
        for (int64_t p = 0; p < panels; ++p) pack_panel(B, packed + p * KC * NR, N, k0, kc, p * NR);
        // (implicit barrier: every panel is packed)
        #pragma omp for collapse(2) schedule(static)
        for (int64_t p = 0; p < panels; ++p) {
            for (int64_t t = 0; t < mtiles; ++t) {
                const int64_t i0 = t * MR, j0 = p * NR;
                const int rows = (int)(M - i0 < MR ? M - i0 : MR);
                const float* a = A + i0 * K + k0;
                const float* panel = packed + p * KC * NR;
                if (j0 + NR <= N) {
                    tile_rows(rows, a, K, panel, kc, C + i0 * N + j0, N, k0 > 0);
                } else {  // right edge: through a full-width buffer
                    const int64_t cols = N - j0;
                    alignas(64) float buf[MR * NR];
                    for (int r = 0; r < rows; ++r)
                        for (int64_t c = 0; c < NR; ++c)
                            buf[r * NR + c] = c < cols ? C[(i0 + r) * N + j0 + c] : 0.0f;
                    tile_rows(rows, a, K, panel, kc, buf, NR, k0 > 0);
                    for (int r = 0; r < rows; ++r) std::memcpy(C + (i0 + r) * N + j0, buf + r * NR, cols * 4);
                }
            }
        }
        // (implicit barrier before the next K block repacks the panels)
    }
    std::free(packed);
}
""")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a.contiguous(), b.contiguous()
        c = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype)
        _lib.matmul(a, b, c, a.shape[0], a.shape[1], b.shape[1])
        return c
