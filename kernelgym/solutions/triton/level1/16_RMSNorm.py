import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_SINGLE = 16384  # rows up to this length are held in registers and read from memory once


@triton.jit
def rmsnorm_rows_kernel(x_ptr, w_ptr, y_ptr, R, C, eps, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    c_ok = cols < C
    mask = (rows < R)[:, None] & c_ok[None, :]
    offs = rows[:, None].to(tl.int64) * C + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    inv = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / C + eps)
    w = tl.load(w_ptr + cols, mask=c_ok, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, x * inv[:, None] * w[None, :], mask=mask)


@triton.jit
def rmsnorm_long_kernel(x_ptr, w_ptr, y_ptr, C, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * C
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for c0 in range(0, C, BLOCK):
        c = c0 + cols
        x = tl.load(x_ptr + base + c, mask=c < C, other=0.0).to(tl.float32)
        acc += x * x
    inv = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / C + eps)
    for c0 in range(0, C, BLOCK):
        c = c0 + cols
        ok = c < C
        x = tl.load(x_ptr + base + c, mask=ok, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + c, mask=ok, other=0.0).to(tl.float32)
        tl.store(y_ptr + base + c, x * inv * w, mask=ok)


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        C = x.shape[-1]
        R = x.numel() // C
        y = torch.empty_like(x)
        if C <= MAX_SINGLE:
            BLOCK = triton.next_power_of_2(C)
            ROWS = max(1, min(16, 4096 // BLOCK))
            warps = 4 if BLOCK <= 2048 else (8 if BLOCK <= 8192 else 16)
            rmsnorm_rows_kernel[(triton.cdiv(R, ROWS),)](x, self.weight, y, R, C, float(self.eps), ROWS=ROWS,
                                                         BLOCK=BLOCK, num_warps=warps)
        else:
            rmsnorm_long_kernel[(R,)](x, self.weight, y, C, float(self.eps), BLOCK=4096, num_warps=8)
        return y
