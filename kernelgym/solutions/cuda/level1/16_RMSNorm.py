import torch
import torch.nn as nn

from kernelgym.kernels import load_cuda

_lib = load_cuda(r"""
#include <cstdint>
#include <cuda_runtime.h>

// RMSNorm over each row: y = x / sqrt(mean(x^2) + eps) * w.
// TPR threads own one row (TPR = 32: a warp per row, 8 rows per 256-thread block; TPR >= 128: one row per
// block). Each thread caches NV4 groups of 4 values of its row in registers (elements (i * TPR + t) * 4 + j),
// so the row is read from memory once and written once. VEC: the row length is a multiple of 4 and the
// pointers are 16-byte aligned, so each group is one float4 access. Rows past the cache take a streaming kernel.

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
__global__ void rows_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t R, int C, const float* __restrict__ w, float eps) {
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
    float q = 0.f;
    #pragma unroll
    for (int i = 0; i < NV4; ++i)
        #pragma unroll
        for (int j = 0; j < 4; ++j) q += v[i][j] * v[i][j];
    const float inv = rsqrtf(row_reduce<TPR, false>(q, sh) / C + eps);
    #pragma unroll
    for (int i = 0; i < NV4; ++i) {
        const int c = (i * TPR + t) * 4;
        float o[4];
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int cc = c + j < C ? c + j : 0;
            (void)cc;
            o[j] = v[i][j] * inv * __ldg(w + cc);
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
__global__ void rows_long(const float* __restrict__ x, float* __restrict__ y, int C, const float* __restrict__ w, float eps) {
    __shared__ float sh[32];
    const float* xr = x + (int64_t)blockIdx.x * C;
    float* yr = y + (int64_t)blockIdx.x * C;
    float q = 0.f;
    for (int c = threadIdx.x; c < C; c += 1024) q += xr[c] * xr[c];
    const float inv = rsqrtf(row_reduce<1024, false>(q, sh) / C + eps);
    for (int c = threadIdx.x; c < C; c += 1024) yr[c] = xr[c] * inv * w[c];
}

template <int TPR, bool VEC>
static void launch_tpr(const float* x, float* y, int64_t R, int C, const float* __restrict__ w, float eps) {
    const int per = (C + 4 * TPR - 1) / (4 * TPR);  // float4 groups per thread
    const unsigned grid = (unsigned)(TPR == 32 ? (R + 7) / 8 : R);
    const int block = TPR == 32 ? 256 : TPR;
    if (per <= 1) rows_kernel<TPR, 1, VEC><<<grid, block>>>(x, y, R, C, w, eps);
    else if (per <= 2) rows_kernel<TPR, 2, VEC><<<grid, block>>>(x, y, R, C, w, eps);
    else if (per <= 4) rows_kernel<TPR, 4, VEC><<<grid, block>>>(x, y, R, C, w, eps);
    else rows_kernel<TPR, 8, VEC><<<grid, block>>>(x, y, R, C, w, eps);
}

template <bool VEC>
static void launch(const float* x, float* y, int64_t R, int C, const float* __restrict__ w, float eps) {
    if (C <= 1024) launch_tpr<32, VEC>(x, y, R, C, w, eps);
    else if (C <= 4096) launch_tpr<128, VEC>(x, y, R, C, w, eps);
    else if (C <= 8192) launch_tpr<256, VEC>(x, y, R, C, w, eps);
    else if (C <= 16384) launch_tpr<512, VEC>(x, y, R, C, w, eps);
    else rows_long<<<(unsigned)R, 1024>>>(x, y, C, w, eps);
}

extern "C" void rmsnorm_launch(const float* x, float* y, int64_t R, int64_t C64, const float* __restrict__ w, float eps) {
    const int C = (int)C64;
    const bool vec = (C % 4 == 0) && ((uintptr_t)x % 16 == 0) && ((uintptr_t)y % 16 == 0);
    if (vec) launch<true>(x, y, R, C, w, eps);
    else launch<false>(x, y, R, C, w, eps);
}
""")


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        C = x.shape[-1]
        _lib.rmsnorm_launch(x, y, x.numel() // C, C, self.weight, float(self.eps))
        return y
