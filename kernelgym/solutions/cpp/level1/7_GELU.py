import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

# Exact (erf) GELU, vectorized with GCC vector types. With z = |x| / sqrt(2), erfc(z) is evaluated as
# t * P(t) * exp(-z^2), t = 1 / (1 + p z) (a five-term rational fit, absolute error below 1.5e-7), and
# gelu(x) = x * (1 - erfc(z) / 2) for x >= 0, x * erfc(z) / 2 below: the small negative tail keeps its
# precision because erfc is computed directly instead of as 1 - erf. exp(-z^2) is 2^v, v = -x^2 log2(e) / 2,
# split into round(v) and a fraction in [-1/2, 1/2] whose 2^f is a fitted degree-5 polynomial; the
# reciprocal is the hardware estimate refined by a Newton step. With AVX-512, vrndscale/vscalef do the
# rounding and the 2^n.
_lib = load_cpp(r"""
#include <cstdint>
#include <cstring>
#include <immintrin.h>

#ifdef __AVX512F__
constexpr int VL = 16;
#else
constexpr int VL = 8;
#endif
typedef float vf __attribute__((vector_size(VL * 4)));
typedef int32_t vi __attribute__((vector_size(VL * 4)));

static inline vf ld(const float* p) { vf v; std::memcpy(&v, p, sizeof v); return v; }
static inline void st(float* p, vf v) { std::memcpy(p, &v, sizeof v); }
static inline vf splat(float s) { return vf{} + s; }

// 2^v for v <= 0 (results below the smallest normal float flush towards 0, which is what gelu needs).
static inline vf v_exp2_neg(vf v) {
#ifdef __AVX512F__
    const vf n = (vf)_mm512_roundscale_ps((__m512)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#else
    v = v > splat(-126.0f) ? v : splat(-126.0f);
    const vf n = (v + splat(12582912.0f)) - splat(12582912.0f);  // round to nearest
#endif
    const vf f = v - n;  // exact, in [-1/2, 1/2]
    vf p = splat(1.32767076e-3f);  // 2^f on [-1/2, 1/2], fitted for relative error (about 1e-7)
    p = p * f + splat(9.67150927e-3f);
    p = p * f + splat(5.55069260e-2f);
    p = p * f + splat(2.40222424e-1f);
    p = p * f + splat(6.93147004e-1f);
    p = p * f + splat(1.0f);
#ifdef __AVX512F__
    return (vf)_mm512_scalef_ps((__m512)p, (__m512)n);
#else
    const vi bits = (__builtin_convertvector(n, vi) + 127) << 23;
    vf scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return p * scale;
#endif
}

// 1 / d for d >= 1: the hardware estimate refined by Newton steps (cheaper than a divide).
static inline vf v_recip(vf d) {
#ifdef __AVX512F__
    vf r = (vf)_mm512_rcp14_ps((__m512)d);
#else
    vf r = (vf)_mm256_rcp_ps((__m256)d);
    r = r * (splat(2.0f) - d * r);
#endif
    return r * (splat(2.0f) - d * r);
}

static inline vf v_abs(vf x) {
    vi bits;
    std::memcpy(&bits, &x, sizeof bits);
    bits &= 0x7fffffff;
    std::memcpy(&x, &bits, sizeof x);
    return x;
}

static inline vf v_gelu(vf x) {
    const vf t = v_recip(splat(1.0f) + splat(0.3275911f * 0.70710678118654752f) * v_abs(x));
    vf p = splat(0.5f * 1.061405429f);  // the fit's coefficients, halved: p * t is erfc(z) / 2 before exp
    p = p * t + splat(0.5f * -1.453152027f);
    p = p * t + splat(0.5f * 1.421413741f);
    p = p * t + splat(0.5f * -0.284496736f);
    p = p * t + splat(0.5f * 0.254829592f);
    const vf half_erfc = t * p * v_exp2_neg((x * splat(-0.72134752044448170f)) * x);
    return x < splat(0.0f) ? x * half_erfc : x - x * half_erfc;
}

extern "C" void gelu_forward(const float* x, float* y, int64_t n) {
    const int64_t pairs = n / (2 * VL);
    #pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < pairs; ++c) {  // two independent vectors per step for the out-of-order core
        const vf a = v_gelu(ld(x + 2 * c * VL)), b = v_gelu(ld(x + (2 * c + 1) * VL));
        st(y + 2 * c * VL, a);
        st(y + (2 * c + 1) * VL, b);
    }
    int64_t done = pairs * 2 * VL;
    if (done + VL <= n) { st(y + done, v_gelu(ld(x + done))); done += VL; }
    if (done < n) {  // the ragged end goes through one zero-padded vector
        float in[VL] = {}, out[VL];
        std::memcpy(in, x + done, sizeof(float) * (n - done));
        st(out, v_gelu(ld(in)));
        std::memcpy(y + done, out, sizeof(float) * (n - done));
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.gelu_forward(x, y, x.numel())
        return y
