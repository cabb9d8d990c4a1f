import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_tanh_exp_kernel(x_ptr, w_ptr, b_ptr, e_ptr, part_ptr, M, N, K,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                           GROUP_M: tl.constexpr):
    # e = exp(tanh(x @ w^T + b)); also each tile's row sums of e into part[M, cdiv(N, BLOCK_N)].
    # tanh is bounded in [-1, 1], so the softmax needs no running maximum: exp cannot overflow.
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    width = GROUP_M * grid_n
    first_m = (pid // width) * GROUP_M
    size_m = tl.minimum(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % size_m
    pid_n = (pid % width) // size_m

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    m_ok = rm < M
    n_ok = rn < N
    x_ptrs = x_ptr + rm[:, None].to(tl.int64) * K + rk[None, :]
    w_ptrs = w_ptr + rn[None, :].to(tl.int64) * K + rk[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = rk + k0 < K
        a = tl.load(x_ptrs, mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(w_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc += tl.dot(a, b, input_precision="tf32x3")
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    y = acc + tl.load(b_ptr + rn, mask=n_ok, other=0.0)[None, :]
    t = tl.exp(-2.0 * tl.abs(y))
    th = (1.0 - t) / (1.0 + t)
    th = tl.where(y < 0, -th, th)
    e = tl.exp(th)
    ok = m_ok[:, None] & n_ok[None, :]
    e = tl.where(ok, e, 0.0)
    tl.store(e_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], e, mask=ok)
    tl.store(part_ptr + rm.to(tl.int64) * grid_n + pid_n, tl.sum(e, axis=1), mask=m_ok)


@triton.jit
def rescale_kernel(e_ptr, part_ptr, out_ptr, N, n_parts, BLOCK: tl.constexpr, PARTS: tl.constexpr):
    # out = e / rowsum(e) * N  (softmax rescaled so that each row has mean 1)
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    pr = tl.arange(0, PARTS)
    parts = tl.load(part_ptr + row * n_parts + pr, mask=pr < n_parts, other=0.0)
    factor = N / tl.sum(parts, axis=0)
    c = chunk * BLOCK + tl.arange(0, BLOCK)
    ok = c < N
    v = tl.load(e_ptr + row * N + c, mask=ok, other=0.0)
    tl.store(out_ptr + row * N + c, v * factor, mask=ok)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.linear.weight.contiguous()
        M, K = x.shape
        N = w.shape[0]
        BM, BN, BK = 128, 128, 16
        grid_n = triton.cdiv(N, BN)
        e = torch.empty((M, N), device=x.device, dtype=x.dtype)
        parts = torch.empty((M, grid_n), device=x.device, dtype=x.dtype)
        linear_tanh_exp_kernel[(triton.cdiv(M, BM) * grid_n,)](x, w, self.linear.bias, e, parts, M, N, K,
                                                                BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M=8,
                                                                num_warps=4, num_stages=3)
        out = torch.empty_like(e)
        BLOCK = 2048
        rescale_kernel[(M, triton.cdiv(N, BLOCK))](e, parts, out, N, grid_n, BLOCK=BLOCK,
                                                   PARTS=max(2, triton.next_power_of_2(grid_n)), num_warps=4)
        return out
