import torch
import torch.nn as nn
import triton
import triton.language as tl

BM, BN, BK = 64, 64, 32


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # C[M, N] (contiguous) = A[M, K] @ B[K, N] in fp32 (ieee products: no TF32); A and B through their
    # strides, so the backward's transposes cost nothing.
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    m_ok = rm < M
    n_ok = rn < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = rk + k0 < K
        a = tl.load(a_ptr + rm[:, None].to(tl.int64) * stride_am + (rk[None, :] + k0) * stride_ak,
                    mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptr + (rk[:, None] + k0).to(tl.int64) * stride_bk + rn[None, :] * stride_bn,
                    mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], acc, mask=m_ok[:, None] & n_ok[None, :])


def _mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    (m, k), n = a.shape, b.shape[1]
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(m, BM), triton.cdiv(n, BN))
    matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK)
    return c


class _Matmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return _mm(a, b)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        grad = grad.contiguous()
        return _mm(grad, b.t()), _mm(a.t(), grad)  # dA = G @ B^T, dB = A^T @ G


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _Matmul.apply(a, b)
