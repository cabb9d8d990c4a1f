import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

# Row softmax in three sweeps over a row that stays in L1: the maximum, then exp(x - max) written to the
# output while its sum accumulates in vector lanes, then a scale by 1 / sum. exp is computed as 2^v with
# v = (x - max) log2(e) <= 0, split into round(v) and a fraction in [-1/2, 1/2] (a fitted degree-5
# polynomial); with AVX-512, vrndscale/vscalef do the rounding and the 2^n (underflow flushes gracefully
# towards 0).
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
static inline vf vmax(vf a, vf b) { return a > b ? a : b; }

static inline vf v_exp2_neg(vf v) {
#ifdef __AVX512F__
    const vf n = (vf)_mm512_roundscale_ps((__m512)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#else
    v = v > splat(-126.0f) ? v : splat(-126.0f);
    const vf n = (v + splat(12582912.0f)) - splat(12582912.0f);
#endif
    const vf f = v - n;
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

static inline float hmax(vf v) {
    float m = v[0];
    for (int l = 1; l < VL; ++l) m = v[l] > m ? v[l] : m;
    return m;
}
static inline float hsum(vf v) { float s = 0.0f; for (int l = 0; l < VL; ++l) s += v[l]; return s; }

extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    const int64_t cv = cols / VL * VL;
    constexpr float LOG2E = 1.44269504088896341f;
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* in = x + r * cols;
        float* out = y + r * cols;
        vf m0 = splat(-__builtin_inff()), m1 = m0;
        int64_t j = 0;
        for (; j + 2 * VL <= cv; j += 2 * VL) { m0 = vmax(m0, ld(in + j)); m1 = vmax(m1, ld(in + j + VL)); }
        for (; j < cv; j += VL) m0 = vmax(m0, ld(in + j));
        float mx = hmax(vmax(m0, m1));
        for (int64_t k = cv; k < cols; ++k) mx = in[k] > mx ? in[k] : mx;
        const vf bias = splat(-mx * LOG2E);
        vf s0 = vf{}, s1 = vf{};
        j = 0;
        for (; j + 2 * VL <= cv; j += 2 * VL) {
            const vf e0 = v_exp2_neg(ld(in + j) * splat(LOG2E) + bias);
            const vf e1 = v_exp2_neg(ld(in + j + VL) * splat(LOG2E) + bias);
            st(out + j, e0); st(out + j + VL, e1);
            s0 += e0; s1 += e1;
        }
        for (; j < cv; j += VL) {
            const vf e = v_exp2_neg(ld(in + j) * splat(LOG2E) + bias);
            st(out + j, e);
            s0 += e;
        }
        float sum = hsum(s0 + s1);
        if (cv < cols) {  // ragged tail through one padded vector (-inf pads give exp 0)
            float pad[VL], e[VL];
            for (int l = 0; l < VL; ++l) pad[l] = cv + l < cols ? in[cv + l] : -__builtin_inff();
            st(e, v_exp2_neg(vmax(ld(pad) * splat(LOG2E) + bias, splat(-200.0f))));
            for (int64_t k = cv; k < cols; ++k) { out[k] = e[k - cv]; sum += e[k - cv]; }
        }
        const vf inv = splat(1.0f / sum);
        for (j = 0; j < cv; j += VL) st(out + j, ld(out + j) * inv);
        for (int64_t k = cv; k < cols; ++k) out[k] *= inv[0];
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        cols = x.shape[-1]
        _lib.softmax_rows(x, y, x.numel() // cols, cols)
        return y
