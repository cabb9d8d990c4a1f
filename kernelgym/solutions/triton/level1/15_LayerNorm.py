import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_SINGLE = 16384  # rows up to this length are held in registers and read from memory once


@triton.jit
def layernorm_rows_kernel(x_ptr, w_ptr, b_ptr, y_ptr, R, C, eps, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    c_ok = cols < C
    mask = (rows < R)[:, None] & c_ok[None, :]
    offs = rows[:, None].to(tl.int64) * C + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=1) / C
    d = tl.where(mask, x - mean[:, None], 0.0)
    var = tl.sum(d * d, axis=1) / C  # biased, as nn.LayerNorm
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=c_ok, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=c_ok, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, d * rstd[:, None] * w[None, :] + b[None, :], mask=mask)


@triton.jit
def layernorm_long_kernel(x_ptr, w_ptr, b_ptr, y_ptr, C, eps, BLOCK: tl.constexpr):
    # One long row per program: mean, variance about the mean, then the normalizing pass.
    row = tl.program_id(0).to(tl.int64)
    base = row * C
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for c0 in range(0, C, BLOCK):
        c = c0 + cols
        acc += tl.load(x_ptr + base + c, mask=c < C, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / C
    acc = tl.zeros((BLOCK,), tl.float32)
    for c0 in range(0, C, BLOCK):
        c = c0 + cols
        d = tl.where(c < C, tl.load(x_ptr + base + c, mask=c < C, other=0.0).to(tl.float32) - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / C + eps)
    for c0 in range(0, C, BLOCK):
        c = c0 + cols
        ok = c < C
        x = tl.load(x_ptr + base + c, mask=ok, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + c, mask=ok, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + c, mask=ok, other=0.0).to(tl.float32)
        tl.store(y_ptr + base + c, (x - mean) * rstd * w + b, mask=ok)


class ModelNew(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        C = self.norm.weight.numel()  # normalized over the last dimension
        R = x.numel() // C
        y = torch.empty_like(x)
        w, b, eps = self.norm.weight, self.norm.bias, self.norm.eps
        if C <= MAX_SINGLE:
            BLOCK = triton.next_power_of_2(C)
            ROWS = max(1, min(16, 4096 // BLOCK))
            warps = 4 if BLOCK <= 2048 else (8 if BLOCK <= 8192 else 16)
            layernorm_rows_kernel[(triton.cdiv(R, ROWS),)](x, w, b, y, R, C, eps, ROWS=ROWS, BLOCK=BLOCK,
                                                           num_warps=warps)
        else:
            layernorm_long_kernel[(R,)](x, w, b, y, C, eps, BLOCK=4096, num_warps=8)
        return y
