import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

# Mean cross entropy: loss_i = logsumexp(logits_i) - logits_i[target_i]. Per row, one sweep finds the maximum
# and a second accumulates exp(x - max) in vector lanes (exp as 2^v: round(v) plus a fitted degree-5
# polynomial for the fraction, vrndscale/vscalef with AVX-512); the row losses are summed in double and
# divided by the batch size, all inside the kernel.
_lib = load_cpp(r"""
#include <cmath>
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
static inline vf splat(float s) { return vf{} + s; }
static inline vf vmax(vf a, vf b) { return a > b ? a : b; }

static inline vf v_exp2_neg(vf v) {  // 2^v for v <= 0
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

extern "C" void cross_entropy_mean(const float* logits, const int64_t* targets, float* out, int64_t rows,
                                   int64_t classes) {
    constexpr float LOG2E = 1.44269504088896341f;
    const int64_t cv = classes / VL * VL;
    double total = 0.0;
    #pragma omp parallel for schedule(static) reduction(+ : total)
    for (int64_t r = 0; r < rows; ++r) {
        const float* in = logits + r * classes;
        vf m0 = splat(-__builtin_inff()), m1 = m0;
        int64_t j = 0;
        for (; j + 2 * VL <= cv; j += 2 * VL) { m0 = vmax(m0, ld(in + j)); m1 = vmax(m1, ld(in + j + VL)); }
        for (; j < cv; j += VL) m0 = vmax(m0, ld(in + j));
        float mx = hmax(vmax(m0, m1));
        for (int64_t k = cv; k < classes; ++k) mx = in[k] > mx ? in[k] : mx;
        const vf bias = splat(-mx * LOG2E);
        vf s0 = vf{}, s1 = vf{};
        j = 0;
        for (; j + 2 * VL <= cv; j += 2 * VL) {
            s0 += v_exp2_neg(ld(in + j) * splat(LOG2E) + bias);
            s1 += v_exp2_neg(ld(in + j + VL) * splat(LOG2E) + bias);
        }
        for (; j < cv; j += VL) s0 += v_exp2_neg(ld(in + j) * splat(LOG2E) + bias);
        float sum = hsum(s0 + s1);
        for (int64_t k = cv; k < classes; ++k) sum += std::exp(in[k] - mx);
        total += (double)(mx + std::log(sum)) - (double)in[targets[r]];
    }
    out[0] = (float)(total / (double)rows);
}
""")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits, targets = logits.contiguous(), targets.contiguous()
        out = torch.empty((), dtype=logits.dtype)
        _lib.cross_entropy_mean(logits, targets, out, logits.shape[0], logits.shape[1])
        return out
