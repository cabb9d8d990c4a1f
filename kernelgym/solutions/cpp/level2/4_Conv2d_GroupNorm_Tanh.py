import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

# tanh(group_norm(conv2d(x, padding=1))) in one kernel call: phase 1 is a register-tiled direct convolution
# (bias included) written to the output; after a barrier, phase 2 takes each (sample, group) slab, computes
# its mean and variance in two passes (double accumulation across rows), and rewrites it normalized, with the
# per-channel affine transform and a vectorized tanh.
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

// exp for a vector: Cody-Waite range reduction to [-ln2/2, ln2/2] and a degree-6 polynomial (~1 ulp);
// inputs are clamped to [-87, 88] so the result stays a normal float.
static inline vf v_exp(vf x) {
    x = x < splat(88.0f) ? x : splat(88.0f);
    x = x > splat(-87.0f) ? x : splat(-87.0f);
    const vf n = (x * splat(1.44269504088896341f) + splat(12582912.0f)) - splat(12582912.0f);
    vf r = x - n * splat(0.693359375f);
    r = r - n * splat(-2.12194440e-4f);
    vf p = splat(1.9875691500e-4f);
    p = p * r + splat(1.3981999507e-3f);
    p = p * r + splat(8.3334519073e-3f);
    p = p * r + splat(4.1665795894e-2f);
    p = p * r + splat(1.6666665459e-1f);
    p = p * r + splat(5.0000001201e-1f);
    p = p * r * r + r + splat(1.0f);
    const vi bits = (__builtin_convertvector(n, vi) + 127) << 23;
    vf scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

static inline vf v_sigmoid(vf x) { return splat(1.0f) / (splat(1.0f) + v_exp(-x)); }

static inline vf v_tanh(vf x) {
    const vf ax = x < splat(0.0f) ? -x : x;
    const vf t = v_exp(ax * splat(-2.0f));
    const vf r = (splat(1.0f) - t) / (splat(1.0f) + t);
    return x < splat(0.0f) ? -r : r;
}
extern "C" void conv_groupnorm_tanh(const float* x, const float* w, const float* conv_bias, const float* gamma,
                                    const float* beta, float* y, int64_t B, int64_t Cin, int64_t H, int64_t W,
                                    int64_t Cout, int64_t G, float eps) {
    const ConvShape s = conv_shape(B, Cin, H, W, Cout, 3, 3, 1);
    float* Xp = scratch(B * Cin * s.Hp * s.Wpp);
    float* wp = scratch(s.ocblocks * Cin * 9 * OCB);
    const int64_t plane = s.OH * s.OW, cg = Cout / G, count = cg * plane;
    const int64_t pv = plane / VL * VL;
    #pragma omp parallel
    {
        conv_prepare(s, x, w, Xp, wp);
        float* rowbuf = scratch(OCB * s.OWpad);
        #pragma omp for collapse(3) schedule(static)
        for (int64_t b = 0; b < B; ++b)
            for (int64_t ob = 0; ob < s.ocblocks; ++ob)
                for (int64_t oh = 0; oh < s.OH; ++oh) {
                    conv_row_block(s, Xp, wp, b, ob, oh, rowbuf);
                    for (int o = 0; o < OCB; ++o) {
                        const int64_t oc = ob * OCB + o;
                        if (oc >= Cout) break;
                        const float cb = conv_bias[oc];
                        const float* src = rowbuf + o * s.OWpad;
                        float* dst = y + ((b * Cout + oc) * s.OH + oh) * s.OW;
                        #pragma omp simd
                        for (int64_t ow = 0; ow < s.OW; ++ow) dst[ow] = src[ow] + cb;
                    }
                }
        std::free(rowbuf);
        #pragma omp for collapse(2) schedule(static)
        for (int64_t b = 0; b < B; ++b)
            for (int64_t g = 0; g < G; ++g) {
                float* slab = y + (b * Cout + g * cg) * plane;
                double total = 0.0;
                for (int64_t c = 0; c < cg; ++c) {
                    const float* p = slab + c * plane;
                    vf acc = vf{};
                    for (int64_t i = 0; i < pv; i += VL) acc += ld(p + i);
                    float part = 0.0f;
                    for (int l = 0; l < VL; ++l) part += acc[l];
                    for (int64_t i = pv; i < plane; ++i) part += p[i];
                    total += part;
                }
                const float mean = (float)(total / (double)count);
                double sq = 0.0;
                for (int64_t c = 0; c < cg; ++c) {
                    const float* p = slab + c * plane;
                    vf acc = vf{};
                    for (int64_t i = 0; i < pv; i += VL) { const vf d = ld(p + i) - mean; acc += d * d; }
                    float part = 0.0f;
                    for (int l = 0; l < VL; ++l) part += acc[l];
                    for (int64_t i = pv; i < plane; ++i) { const float d = p[i] - mean; part += d * d; }
                    sq += part;
                }
                const float inv = (float)(1.0 / std::sqrt(sq / (double)count + (double)eps));
                for (int64_t c = 0; c < cg; ++c) {
                    float* p = slab + c * plane;
                    const float sc = inv * gamma[g * cg + c];
                    const float sh = beta[g * cg + c] - mean * sc;
                    for (int64_t i = 0; i < pv; i += VL) st(p + i, v_tanh(ld(p + i) * sc + sh));
                    for (int64_t i = pv; i < plane; ++i) p[i] = std::tanh(p[i] * sc + sh);
                }
            }
    }
    std::free(Xp);
    std::free(wp);
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, num_groups: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        b, cin, h, w = x.shape
        cout = self.conv.out_channels
        y = torch.empty(b, cout, h, w, dtype=x.dtype)
        _lib.conv_groupnorm_tanh(x, self.conv.weight.contiguous(), self.conv.bias.contiguous(),
                                 self.norm.weight.contiguous(), self.norm.bias.contiguous(), y,
                                 b, cin, h, w, cout, self.norm.num_groups, float(self.norm.eps))
        return y
