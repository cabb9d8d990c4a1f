import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def glu_linear_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, H, K,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         GROUP_M: tl.constexpr):
    # The linear layer has 2H outputs: value = rows [0, H) of w, gate = rows [H, 2H).
    # Each program computes matching value and gate tiles and writes value * sigmoid(gate): [M, H].
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(H, BLOCK_N)
    width = GROUP_M * grid_n
    first_m = (pid // width) * GROUP_M
    size_m = tl.minimum(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % size_m
    pid_n = (pid % width) // size_m

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    m_ok = rm < M
    n_ok = rn < H
    x_ptrs = x_ptr + rm[:, None].to(tl.int64) * K + rk[None, :]
    wv_ptrs = w_ptr + rn[None, :].to(tl.int64) * K + rk[:, None]
    wg_ptrs = w_ptr + (rn[None, :] + H).to(tl.int64) * K + rk[:, None]
    acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_v = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = rk + k0 < K
        a = tl.load(x_ptrs, mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        wg = tl.load(wg_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        wv = tl.load(wv_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc_g += tl.dot(a, wg, input_precision="tf32x3")
        acc_v += tl.dot(a, wv, input_precision="tf32x3")
        x_ptrs += BLOCK_K
        wg_ptrs += BLOCK_K
        wv_ptrs += BLOCK_K
    v = acc_v + tl.load(b_ptr + rn, mask=n_ok, other=0.0)[None, :]
    g = acc_g + tl.load(b_ptr + H + rn, mask=n_ok, other=0.0)[None, :]
    out = v / (1.0 + tl.exp(-g))
    tl.store(y_ptr + rm[:, None].to(tl.int64) * H + rn[None, :], out, mask=m_ok[:, None] & n_ok[None, :])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, hidden_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, 2 * hidden_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.linear.weight.contiguous()
        M, K = x.shape
        H = w.shape[0] // 2
        y = torch.empty((M, H), device=x.device, dtype=x.dtype)
        BM, BN, BK = 128, 64, 16
        grid = (triton.cdiv(M, BM) * triton.cdiv(H, BN),)
        glu_linear_kernel[grid](x, w, self.linear.bias, y, M, H, K, BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK,
                                   GROUP_M=8, num_warps=4, num_stages=3)
        return y
