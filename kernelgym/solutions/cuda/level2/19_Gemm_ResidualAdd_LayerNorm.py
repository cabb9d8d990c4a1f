import torch
import torch.nn as nn

from kernelgym.kernels import load_cuda

_lib = load_cuda(r"""

#include <cstdint>
#include <cuda_runtime.h>

// y[M, N] = x[M, K] @ w[N, K]^T + bias[N] + x[M, N]   (square layer: N == K, the residual is x)
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
__global__ void __launch_bounds__(256) gemm_bias_residual(const float* __restrict__ X, const float* __restrict__ Wt,
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
            for (int j = 0; j < 4; ++j) o[j] = (c + j < N) ? acc[i][h * 4 + j] + bias[c + j] + X[(int64_t)r * K + c + j] : 0.f;
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


// ---- LayerNorm over each row of y (see layernorm_rows below) ----
__device__ __forceinline__ float warp_max(float v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
// reduction over the TPR threads of a row (sh: 32 floats); every thread of the row gets the result
template <int TPR, bool IS_MAX>
__device__ __forceinline__ float row_reduce(float v, float* sh) {
    v = IS_MAX ? warp_max(v) : warp_sum(v);
    if (TPR == 32) return v;
    const int w = threadIdx.x >> 5;
    __syncthreads();  // sh may still be read by an earlier reduction
    if ((threadIdx.x & 31) == 0) sh[w] = v;
    __syncthreads();
    float r = sh[0];
    #pragma unroll
    for (int i = 1; i < TPR / 32; ++i) r = IS_MAX ? fmaxf(r, sh[i]) : r + sh[i];
    return r;
}

template <int TPR, int NV4, bool VEC>
__global__ void rows_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t R, int C, const float* __restrict__ w, const float* __restrict__ b, float eps) {
    __shared__ float sh[32];
    constexpr int RPB = TPR == 32 ? 8 : 1;  // rows per block
    const int t = TPR == 32 ? (threadIdx.x & 31) : threadIdx.x;
    const int64_t row = (int64_t)blockIdx.x * RPB + (TPR == 32 ? (threadIdx.x >> 5) : 0);
    if (TPR == 32 && row >= R) return;  // the whole warp leaves; no block barrier is used in this mode
    const float* xr = x + row * C;
    float* yr = y + row * C;
    float v[NV4][4];
    #pragma unroll
    for (int i = 0; i < NV4; ++i) {
        const int c = (i * TPR + t) * 4;
        if (VEC && c < C) {
            float4 q = __ldg(reinterpret_cast<const float4*>(xr + c));
            v[i][0] = q.x; v[i][1] = q.y; v[i][2] = q.z; v[i][3] = q.w;
        } else {
            #pragma unroll
            for (int j = 0; j < 4; ++j) v[i][j] = (c + j < C) ? __ldg(xr + c + j) : 0.f;
        }
    }
    float s = 0.f;
    #pragma unroll
    for (int i = 0; i < NV4; ++i)
        #pragma unroll
        for (int j = 0; j < 4; ++j) s += v[i][j];
    const float mean = row_reduce<TPR, false>(s, sh) / C;
    float q = 0.f;
    #pragma unroll
    for (int i = 0; i < NV4; ++i)
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            const float d = ((i * TPR + t) * 4 + j < C) ? v[i][j] - mean : 0.f;
            q += d * d;
        }
    const float rstd = rsqrtf(row_reduce<TPR, false>(q, sh) / C + eps);
    #pragma unroll
    for (int i = 0; i < NV4; ++i) {
        const int c = (i * TPR + t) * 4;
        float o[4];
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int cc = c + j < C ? c + j : 0;
            (void)cc;
            o[j] = (v[i][j] - mean) * rstd * __ldg(w + cc) + __ldg(b + cc);
        }
        if (VEC && c < C) {
            *reinterpret_cast<float4*>(yr + c) = make_float4(o[0], o[1], o[2], o[3]);
        } else {
            #pragma unroll
            for (int j = 0; j < 4; ++j) if (c + j < C) yr[c + j] = o[j];
        }
    }
}

// rows longer than the register cache: one block of 1024 threads per row, re-reading the row
__global__ void rows_long(const float* __restrict__ x, float* __restrict__ y, int C, const float* __restrict__ w, const float* __restrict__ b, float eps) {
    __shared__ float sh[32];
    const float* xr = x + (int64_t)blockIdx.x * C;
    float* yr = y + (int64_t)blockIdx.x * C;
    float s = 0.f;
    for (int c = threadIdx.x; c < C; c += 1024) s += xr[c];
    const float mean = row_reduce<1024, false>(s, sh) / C;
    float q = 0.f;
    for (int c = threadIdx.x; c < C; c += 1024) { const float d = xr[c] - mean; q += d * d; }
    const float rstd = rsqrtf(row_reduce<1024, false>(q, sh) / C + eps);
    for (int c = threadIdx.x; c < C; c += 1024) yr[c] = (xr[c] - mean) * rstd * w[c] + b[c];
}

template <int TPR, bool VEC>
static void launch_tpr(const float* x, float* y, int64_t R, int C, const float* __restrict__ w, const float* __restrict__ b, float eps) {
    const int per = (C + 4 * TPR - 1) / (4 * TPR);  // float4 groups per thread
    const unsigned grid = (unsigned)(TPR == 32 ? (R + 7) / 8 : R);
    const int block = TPR == 32 ? 256 : TPR;
    if (per <= 1) rows_kernel<TPR, 1, VEC><<<grid, block>>>(x, y, R, C, w, b, eps);
    else if (per <= 2) rows_kernel<TPR, 2, VEC><<<grid, block>>>(x, y, R, C, w, b, eps);
    else if (per <= 4) rows_kernel<TPR, 4, VEC><<<grid, block>>>(x, y, R, C, w, b, eps);
    else rows_kernel<TPR, 8, VEC><<<grid, block>>>(x, y, R, C, w, b, eps);
}

template <bool VEC>
static void launch(const float* x, float* y, int64_t R, int C, const float* __restrict__ w, const float* __restrict__ b, float eps) {
    if (C <= 1024) launch_tpr<32, VEC>(x, y, R, C, w, b, eps);
    else if (C <= 4096) launch_tpr<128, VEC>(x, y, R, C, w, b, eps);
    else if (C <= 8192) launch_tpr<256, VEC>(x, y, R, C, w, b, eps);
    else if (C <= 16384) launch_tpr<512, VEC>(x, y, R, C, w, b, eps);
    else rows_long<<<(unsigned)R, 1024>>>(x, y, C, w, b, eps);
}

static void layernorm_rows(const float* x, float* y, int64_t R, int64_t C64, const float* __restrict__ w, const float* __restrict__ b, float eps) {
    const int C = (int)C64;
    const bool vec = (C % 4 == 0) && ((uintptr_t)x % 16 == 0) && ((uintptr_t)y % 16 == 0);
    if (vec) launch<true>(x, y, R, C, w, b, eps);
    else launch<false>(x, y, R, C, w, b, eps);
}

extern "C" void gemm_residual_layernorm(const float* x, const float* w, const float* bias, const float* gamma,
                                        const float* beta, float* y, float* out, int64_t M, int64_t N, int64_t K,
                                        float eps) {
    dim3 grid((unsigned)((N + BN - 1) / BN), (unsigned)((M + BM - 1) / BM));
    const bool vec = (K % 4 == 0) && (N % 4 == 0) && ((uintptr_t)x % 16 == 0) && ((uintptr_t)w % 16 == 0) &&
                     ((uintptr_t)y % 16 == 0);
    if (vec) gemm_bias_residual<true><<<grid, 256>>>(x, w, bias, y, (int)M, (int)N, (int)K);
    else gemm_bias_residual<false><<<grid, 256>>>(x, w, bias, y, (int)M, (int)N, (int)K);
    layernorm_rows(y, out, M, N, gamma, beta, eps);  // same stream: runs after the GEMM
}
""")


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.norm = nn.LayerNorm(features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.linear.weight.contiguous()
        M, K = x.shape
        N = w.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=x.dtype)
        out = torch.empty_like(y)
        _lib.gemm_residual_layernorm(x, w, self.linear.bias, self.norm.weight, self.norm.bias, y, out, M, N, K,
                                     float(self.norm.eps))
        return out
