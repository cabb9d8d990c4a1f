import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

# hardswish(max_pool2d(conv2d(x), p)) in one kernel: each task computes the p conv rows that feed one row of
# pooled outputs for 8 channels into a small cache-resident buffer, then pools, adds the conv bias (a per
# channel constant commutes with the max) and applies hard-swish. The full-size conv output never exists.
_lib = load_cpp(r"""
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <omp.h>

#ifdef __AVX512F__
constexpr int VL = 16;
#else
constexpr int VL = 8;
#endif
typedef float vf __attribute__((vector_size(VL * 4)));
typedef int32_t vi __attribute__((vector_size(VL * 4)));
constexpr int OCB = 8;       // output channels per register tile
constexpr int CW = 2 * VL;   // output columns per register tile (two vectors)

static inline vf ld(const float* p) { vf v; std::memcpy(&v, p, sizeof v); return v; }
static inline void st(float* p, vf v) { std::memcpy(p, &v, sizeof v); }
static inline vf splat(float s) { return vf{} + s; }
static inline int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }
static float* scratch(int64_t n) { return (float*)std::aligned_alloc(64, (size_t)round_up(n * 4, 64)); }

// Direct stride-1 2-D convolution over NCHW data, in three steps:
//  * the input is copied once into a zero-padded buffer Xp[b][ic][Hp][Wpp] whose rows are wide enough that
//    vector loads for a whole register tile never leave the row (so no bounds checks in the hot loop);
//  * the weights are regrouped as wp[ocb][ic][kh][kw][OCB] so one tap of OCB output channels is contiguous;
//  * each (batch, channel block, output row) accumulates OCB x CW outputs in registers over every tap and
//    hands the finished row block to the caller's epilogue.
struct ConvShape {
    int64_t B, Cin, H, W, Cout, KH, KW, pad, OH, OW, Hp, Wpp, OWpad, ocblocks;
};

static ConvShape conv_shape(int64_t B, int64_t Cin, int64_t H, int64_t W, int64_t Cout, int64_t KH, int64_t KW,
                            int64_t pad) {
    ConvShape s{B, Cin, H, W, Cout, KH, KW, pad, 0, 0, 0, 0, 0, 0};
    s.OH = H + 2 * pad - KH + 1;
    s.OW = W + 2 * pad - KW + 1;
    s.Hp = H + 2 * pad;
    s.OWpad = round_up(s.OW, CW);
    s.Wpp = s.OWpad + KW - 1;
    s.ocblocks = (Cout + OCB - 1) / OCB;
    return s;
}

// Inside a parallel region: fill Xp and wp (ends with the barrier of the last omp for).
static void conv_prepare(const ConvShape& s, const float* x, const float* w, float* Xp, float* wp) {
    #pragma omp for schedule(static) nowait
    for (int64_t bc = 0; bc < s.B * s.Cin; ++bc) {
        float* dst = Xp + bc * s.Hp * s.Wpp;
        std::memset(dst, 0, sizeof(float) * s.Hp * s.Wpp);
        for (int64_t h = 0; h < s.H; ++h)
            std::memcpy(dst + (h + s.pad) * s.Wpp + s.pad, x + (bc * s.H + h) * s.W, sizeof(float) * s.W);
    }
    const int64_t taps = s.Cin * s.KH * s.KW;
    #pragma omp for schedule(static)
    for (int64_t ob = 0; ob < s.ocblocks; ++ob)
        for (int64_t t = 0; t < taps; ++t)
            for (int o = 0; o < OCB; ++o) {
                const int64_t oc = ob * OCB + o;
                wp[(ob * taps + t) * OCB + o] = oc < s.Cout ? w[oc * taps + t] : 0.0f;
            }
}

// rowbuf[o * OWpad + ow] = conv output (no bias) of channel ob*OCB+o, row oh, for ow < OWpad.
static void conv_row_block(const ConvShape& s, const float* Xp, const float* wp, int64_t b, int64_t ob,
                           int64_t oh, float* rowbuf) {
    const int64_t taps = s.Cin * s.KH * s.KW;
    const float* wblock = wp + ob * taps * OCB;
    for (int64_t ow0 = 0; ow0 < s.OWpad; ow0 += CW) {
        vf a0[OCB], a1[OCB];
        #pragma GCC unroll 8
        for (int o = 0; o < OCB; ++o) { a0[o] = vf{}; a1[o] = vf{}; }
        const float* wt = wblock;
        for (int64_t ic = 0; ic < s.Cin; ++ic) {
            const float* xc = Xp + ((b * s.Cin + ic) * s.Hp + oh) * s.Wpp + ow0;
            for (int64_t kh = 0; kh < s.KH; ++kh) {
                const float* xr = xc + kh * s.Wpp;
                for (int64_t kw = 0; kw < s.KW; ++kw, wt += OCB) {
                    const vf x0 = ld(xr + kw), x1 = ld(xr + kw + VL);
                    #pragma GCC unroll 8
                    for (int o = 0; o < OCB; ++o) {
                        a0[o] += wt[o] * x0;
                        a1[o] += wt[o] * x1;
                    }
                }
            }
        }
        #pragma GCC unroll 8
        for (int o = 0; o < OCB; ++o) {
            st(rowbuf + o * s.OWpad + ow0, a0[o]);
            st(rowbuf + o * s.OWpad + ow0 + VL, a1[o]);
        }
    }
}
extern "C" void conv_maxpool_hardswish(const float* x, const float* w, const float* conv_bias, float* y,
                                       int64_t B, int64_t Cin, int64_t H, int64_t W, int64_t Cout, int64_t K,
                                       int64_t P) {
    const ConvShape s = conv_shape(B, Cin, H, W, Cout, K, K, 0);
    const int64_t PH = s.OH / P, PW = s.OW / P;
    float* Xp = scratch(B * Cin * s.Hp * s.Wpp);
    float* wp = scratch(s.ocblocks * Cin * K * K * OCB);
    #pragma omp parallel
    {
        conv_prepare(s, x, w, Xp, wp);
        float* rows = scratch(P * OCB * s.OWpad);
        #pragma omp for collapse(3) schedule(static)
        for (int64_t b = 0; b < B; ++b)
            for (int64_t ob = 0; ob < s.ocblocks; ++ob)
                for (int64_t ph = 0; ph < PH; ++ph) {
                    for (int64_t r = 0; r < P; ++r)
                        conv_row_block(s, Xp, wp, b, ob, ph * P + r, rows + r * OCB * s.OWpad);
                    for (int o = 0; o < OCB; ++o) {
                        const int64_t oc = ob * OCB + o;
                        if (oc >= Cout) break;
                        const float cb = conv_bias[oc];
                        float* dst = y + ((b * Cout + oc) * PH + ph) * PW;
                        for (int64_t pw = 0; pw < PW; ++pw) {
                            float m = -INFINITY;
                            for (int64_t r = 0; r < P; ++r) {
                                const float* src = rows + (r * OCB + o) * s.OWpad + pw * P;
                                for (int64_t c = 0; c < P; ++c) m = src[c] > m ? src[c] : m;
                            }
                            const float v = m + cb;
                            float g = v + 3.0f;
                            g = g < 0.0f ? 0.0f : (g > 6.0f ? 6.0f : g);
                            dst[pw] = v * g / 6.0f;
                        }
                    }
                }
        std::free(rows);
    }
    std::free(Xp);
    std::free(wp);
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, pool_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3)
        self.pool_size = pool_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        b, cin, h, w = x.shape
        cout, k, p = self.conv.out_channels, self.conv.kernel_size[0], self.pool_size
        y = torch.empty(b, cout, (h - k + 1) // p, (w - k + 1) // p, dtype=x.dtype)
        _lib.conv_maxpool_hardswish(x, self.conv.weight.contiguous(), self.conv.bias.contiguous(), y,
                                    b, cin, h, w, cout, k, p)
        return y
