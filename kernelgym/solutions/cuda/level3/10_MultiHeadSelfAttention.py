import torch
import torch.nn as nn

from kernelgym.kernels import load_cuda

_lib = load_cuda(r"""
#include <cstdint>
#include <cuda_runtime.h>

// ---- linear layer: y[M, N] = x[M, K] @ w[N, K]^T + bias[N] ----
// 128x128 block tile, BK = 8, 256 threads each owning an 8x8 sub-tile (rows ty*4+{0..3} and 64+ty*4+{0..3},
// cols likewise with tx); shared memory double-buffered, the next tile prefetched into registers.
#define BM 128
#define BN 128
#define BK 8

template <bool VEC>
__device__ __forceinline__ void load_rows(const float* __restrict__ src, int rows, int K, int r0, int k0, int tid, float v[4]) {
    int r = r0 + (tid >> 1), k = k0 + (tid & 1) * 4;
    if (VEC) {
        if (r < rows && k < K) {
            float4 t = *reinterpret_cast<const float4*>(src + (int64_t)r * K + k);
            v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
        } else {
            v[0] = v[1] = v[2] = v[3] = 0.f;
        }
    } else {
        #pragma unroll
        for (int i = 0; i < 4; ++i) v[i] = (r < rows && k + i < K) ? src[(int64_t)r * K + k + i] : 0.f;
    }
}

template <bool VEC>
__global__ void __launch_bounds__(256) gemm_bias(const float* __restrict__ X, const float* __restrict__ Wt,
                                                      const float* __restrict__ bias, float* __restrict__ Y,
                                                      int M, int N, int K) {
    __shared__ __align__(16) float As[2][BK][BM];
    __shared__ __align__(16) float Bs[2][BK][BN];
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int lr = tid >> 1, lk = (tid & 1) * 4;
    float acc[8][8];
    #pragma unroll
    for (int i = 0; i < 8; ++i)
        #pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;
    float ra[4], rb[4];
    load_rows<VEC>(X, M, K, m0, 0, tid, ra);
    load_rows<VEC>(Wt, N, K, n0, 0, tid, rb);
    #pragma unroll
    for (int i = 0; i < 4; ++i) { As[0][lk + i][lr] = ra[i]; Bs[0][lk + i][lr] = rb[i]; }
    __syncthreads();
    int buf = 0;
    for (int k0 = 0; k0 < K; k0 += BK) {
        const bool more = k0 + BK < K;
        if (more) { load_rows<VEC>(X, M, K, m0, k0 + BK, tid, ra); load_rows<VEC>(Wt, N, K, n0, k0 + BK, tid, rb); }
        #pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[8], b[8];
            float4 t;
            t = *reinterpret_cast<const float4*>(&As[buf][k][ty * 4]);      a[0] = t.x; a[1] = t.y; a[2] = t.z; a[3] = t.w;
            t = *reinterpret_cast<const float4*>(&As[buf][k][64 + ty * 4]); a[4] = t.x; a[5] = t.y; a[6] = t.z; a[7] = t.w;
            t = *reinterpret_cast<const float4*>(&Bs[buf][k][tx * 4]);      b[0] = t.x; b[1] = t.y; b[2] = t.z; b[3] = t.w;
            t = *reinterpret_cast<const float4*>(&Bs[buf][k][64 + tx * 4]); b[4] = t.x; b[5] = t.y; b[6] = t.z; b[7] = t.w;
            #pragma unroll
            for (int i = 0; i < 8; ++i)
                #pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        if (more) {
            // the other buffer was last read before the previous barrier, so it is free to overwrite
            #pragma unroll
            for (int i = 0; i < 4; ++i) { As[buf ^ 1][lk + i][lr] = ra[i]; Bs[buf ^ 1][lk + i][lr] = rb[i]; }
            __syncthreads();
            buf ^= 1;
        }
    }
    #pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int r = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
        if (r >= M) continue;
        #pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int c = n0 + h * 64 + tx * 4;
            float o[4];
            #pragma unroll
            for (int j = 0; j < 4; ++j) o[j] = (c + j < N) ? acc[i][h * 4 + j] + bias[c + j] : 0.f;
            float* dst = Y + (int64_t)r * N + c;
            if (VEC && c + 3 < N) {
                *reinterpret_cast<float4*>(dst) = make_float4(o[0], o[1], o[2], o[3]);
            } else {
                #pragma unroll
                for (int j = 0; j < 4; ++j) if (c + j < N) dst[j] = o[j];
            }
        }
    }
}

extern "C" void linear_launch(const float* x, const float* w, const float* bias, float* y,
                              int64_t M, int64_t N, int64_t K) {
    dim3 grid((unsigned)((N + BN - 1) / BN), (unsigned)((M + BM - 1) / BM));
    const bool vec = (K % 4 == 0) && (N % 4 == 0) && ((uintptr_t)x % 16 == 0) && ((uintptr_t)w % 16 == 0) &&
                     ((uintptr_t)y % 16 == 0);
    if (vec) gemm_bias<true><<<grid, 256>>>(x, w, bias, y, (int)M, (int)N, (int)K);
    else gemm_bias<false><<<grid, 256>>>(x, w, bias, y, (int)M, (int)N, (int)K);
}


#include <cstdint>
#include <cuda_runtime.h>

// ---- attention: the heads' q, k, v are read in place from the fused projection's output ----
// qkv is (batch * S, 3E) row-major = [b, s, (q|k|v), head, d]; o is written as (batch * S, E) = [b, s, head, d],
// the head concatenation that the output projection reads. Row, batch and head strides come as arguments.
// Fused attention, fp32 throughout: o = softmax(q k^T * scale) v, with the scores streamed through shared
// memory in key tiles of BKV and an online softmax (running max m and sum l per query row), so the
// S_q x S_k score matrix never reaches global memory.
// Block: BQ = 128 queries of one batch entry, 256 threads as 16 (ty) x 16 (tx).
//   scores: thread (ty, tx) owns rows ty*8+{0..7} and keys tx+16*{0..3} of the tile;
//   output: rows ty*8+{0..7} and features tx*4+{0..3} (+64 per further 64-wide slice of DP).
// DP is the head dimension rounded up (32, 64 or 128); padding columns are zero.
#define BQ 128
#define BKV 64
#define RT 8

template <int DP>
__global__ void __launch_bounds__(256) attention_fwd(const float* __restrict__ q, const float* __restrict__ k,
                                                     const float* __restrict__ v, float* __restrict__ o,
                                                     int S_q, int S_k, int D, float qk_scale, int H,
                                                     int64_t in_rs, int64_t in_bs, int64_t out_rs, int64_t out_bs) {
    constexpr int LD = DP + 4;        // row stride of Qs/Ks: float4 reads by 16 consecutive rows are conflict-free
    constexpr int LDP = BQ + 4;       // row stride of Ps (one row per key)
    constexpr int DH = DP / 64 > 0 ? DP / 64 : 1;   // 64-wide output slices per thread
    constexpr int DC = DP >= 64 ? 4 : DP / 16;      // features per slice per thread
    extern __shared__ __align__(16) float smem[];
    float* Qs = smem;                 // [BQ][LD]
    float* Ks = Qs + BQ * LD;         // [BKV][LD]
    float* Vs = Ks + BKV * LD;        // [BKV][DP]
    float* Ps = Vs + BKV * DP;        // [BKV][LDP]

    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int64_t b = blockIdx.y / H, hd = blockIdx.y % H;
    const int q0 = blockIdx.x * BQ;
    const float* qb = q + b * in_bs + hd * D;
    const float* kb = k + b * in_bs + hd * D;
    const float* vb = v + b * in_bs + hd * D;

    for (int idx = tid; idx < BQ * DP; idx += 256) {
        int r = idx / DP, d = idx % DP;
        int row = q0 + r;
        Qs[r * LD + d] = (row < S_q && d < D) ? __ldg(qb + (int64_t)row * in_rs + d) * qk_scale : 0.f;
    }

    float acc[RT][DH * DC];
    float m[RT], l[RT];
    #pragma unroll
    for (int r = 0; r < RT; ++r) {
        m[r] = -INFINITY;
        l[r] = 0.f;
        #pragma unroll
        for (int c = 0; c < DH * DC; ++c) acc[r][c] = 0.f;
    }

    for (int kv0 = 0; kv0 < S_k; kv0 += BKV) {
        __syncthreads();  // everyone is done with the previous Ks, Vs and Ps
        for (int idx = tid; idx < BKV * DP; idx += 256) {
            int r = idx / DP, d = idx % DP;
            int key = kv0 + r;
            bool ok = key < S_k && d < D;
            Ks[r * LD + d] = ok ? __ldg(kb + (int64_t)key * in_rs + d) : 0.f;
            Vs[r * DP + d] = ok ? __ldg(vb + (int64_t)key * in_rs + d) : 0.f;
        }
        __syncthreads();

        float s[RT][4];
        #pragma unroll
        for (int r = 0; r < RT; ++r)
            #pragma unroll
            for (int j = 0; j < 4; ++j) s[r][j] = 0.f;
        #pragma unroll 4
        for (int d = 0; d < DP; d += 4) {
            float4 kk[4];
            #pragma unroll
            for (int j = 0; j < 4; ++j) kk[j] = *reinterpret_cast<const float4*>(&Ks[(tx + 16 * j) * LD + d]);
            #pragma unroll
            for (int r = 0; r < RT; ++r) {
                float4 qq = *reinterpret_cast<const float4*>(&Qs[(ty * RT + r) * LD + d]);
                #pragma unroll
                for (int j = 0; j < 4; ++j) {
                    s[r][j] = fmaf(qq.x, kk[j].x, s[r][j]);
                    s[r][j] = fmaf(qq.y, kk[j].y, s[r][j]);
                    s[r][j] = fmaf(qq.z, kk[j].z, s[r][j]);
                    s[r][j] = fmaf(qq.w, kk[j].w, s[r][j]);
                }
            }
        }
        // online softmax: the 16 lanes with one ty hold a row's 64 scores (4 each)
        #pragma unroll
        for (int r = 0; r < RT; ++r) {
            float mx = -INFINITY;
            #pragma unroll
            for (int j = 0; j < 4; ++j) {
                if (kv0 + tx + 16 * j >= S_k) s[r][j] = -INFINITY;
                mx = fmaxf(mx, s[r][j]);
            }
            #pragma unroll
            for (int off = 8; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
            const float m_new = fmaxf(m[r], mx);   // finite: every tile holds at least one valid key
            const float alpha = exp2f(m[r] - m_new);
            float sum = 0.f;
            #pragma unroll
            for (int j = 0; j < 4; ++j) {
                float p = exp2f(s[r][j] - m_new);
                sum += p;
                Ps[(tx + 16 * j) * LDP + ty * RT + r] = p;
            }
            #pragma unroll
            for (int off = 8; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
            l[r] = l[r] * alpha + sum;
            m[r] = m_new;
            #pragma unroll
            for (int c = 0; c < DH * DC; ++c) acc[r][c] *= alpha;
        }
        __syncthreads();  // Ps complete
        const int kmax = min(BKV, S_k - kv0);
        for (int kk = 0; kk < kmax; ++kk) {
            float p[RT];
            #pragma unroll
            for (int r = 0; r < RT; r += 4) {
                float4 t = *reinterpret_cast<const float4*>(&Ps[kk * LDP + ty * RT + r]);
                p[r] = t.x; p[r + 1] = t.y; p[r + 2] = t.z; p[r + 3] = t.w;
            }
            #pragma unroll
            for (int h = 0; h < DH; ++h) {
                float vv[DC];
                if constexpr (DC == 4) {
                    float4 t = *reinterpret_cast<const float4*>(&Vs[kk * DP + h * 64 + tx * 4]);
                    vv[0] = t.x; vv[1] = t.y; vv[2] = t.z; vv[3] = t.w;
                } else {
                    #pragma unroll
                    for (int c = 0; c < DC; ++c) vv[c] = Vs[kk * DP + tx * DC + c];
                }
                #pragma unroll
                for (int r = 0; r < RT; ++r)
                    #pragma unroll
                    for (int c = 0; c < DC; ++c) acc[r][h * DC + c] = fmaf(p[r], vv[c], acc[r][h * DC + c]);
            }
        }
    }
    float* ob = o + b * out_bs + hd * D;
    #pragma unroll
    for (int r = 0; r < RT; ++r) {
        const int row = q0 + ty * RT + r;
        if (row >= S_q) continue;
        const float inv = 1.f / l[r];
        #pragma unroll
        for (int h = 0; h < DH; ++h)
            #pragma unroll
            for (int c = 0; c < DC; ++c) {
                const int d = (DC == 4) ? h * 64 + tx * 4 + c : tx * DC + c;
                if (d < D) ob[(int64_t)row * out_rs + d] = acc[r][h * DC + c] * inv;
            }
    }
}

template <int DP>
static void launch_attention(const float* qkv, float* o, int B, int H, int S, int D, int64_t E, float scale) {
    const size_t smem = sizeof(float) * (size_t)(BQ * (DP + 4) + BKV * (DP + 4) + BKV * DP + BKV * (BQ + 4));
    static bool configured = false;
    if (!configured) {
        cudaFuncSetAttribute(attention_fwd<DP>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        configured = true;
    }
    dim3 grid((unsigned)((S + BQ - 1) / BQ), (unsigned)(B * H));
    attention_fwd<DP><<<grid, 256, smem>>>(qkv, qkv + E, qkv + 2 * E, o, S, S, D, scale, H,
                                           3 * E, (int64_t)S * 3 * E, E, (int64_t)S * E);
}

// head_dim up to 128
extern "C" void mha_attention(const float* qkv, float* o, int64_t B, int64_t H, int64_t S, int64_t D, int64_t E,
                              float qk_scale_log2) {
    if (D <= 32) launch_attention<32>(qkv, o, (int)B, (int)H, (int)S, (int)D, E, qk_scale_log2);
    else if (D <= 64) launch_attention<64>(qkv, o, (int)B, (int)H, (int)S, (int)D, E, qk_scale_log2);
    else launch_attention<128>(qkv, o, (int)B, (int)H, (int)S, (int)D, E, qk_scale_log2);
}
""")


class ModelNew(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, e = x.shape
        H, D = self.num_heads, self.head_dim
        x2 = x.contiguous().view(b * s, e)
        qkv = torch.empty((b * s, 3 * e), device=x.device, dtype=x.dtype)
        _lib.linear_launch(x2, self.qkv.weight.contiguous(), self.qkv.bias, qkv, b * s, 3 * e, e)
        attn = torch.empty((b * s, e), device=x.device, dtype=x.dtype)
        _lib.mha_attention(qkv, attn, b, H, s, D, e, float(D ** -0.5 * 1.4426950408889634))
        out = torch.empty((b * s, e), device=x.device, dtype=x.dtype)
        _lib.linear_launch(attn, self.out_proj.weight.contiguous(), self.out_proj.bias, out, b * s, e, e)
        return out.view(b, s, e)
