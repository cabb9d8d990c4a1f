import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_SINGLE = 16384  # rows up to this length are held in registers and read from memory once


@triton.jit
def l2norm_rows_kernel(x_ptr, y_ptr, R, C, eps, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (rows < R)[:, None] & (cols < C)[None, :]
    offs = rows[:, None].to(tl.int64) * C + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    norm = tl.maximum(tl.sqrt(tl.sum(x * x, axis=1)), eps)
    tl.store(y_ptr + offs, x / norm[:, None], mask=mask)


@triton.jit
def l2norm_long_kernel(x_ptr, y_ptr, C, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * C
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for c0 in range(0, C, BLOCK):
        c = c0 + cols
        x = tl.load(x_ptr + base + c, mask=c < C, other=0.0).to(tl.float32)
        acc += x * x
    norm = tl.maximum(tl.sqrt(tl.sum(acc, axis=0)), eps)
    for c0 in range(0, C, BLOCK):
        c = c0 + cols
        x = tl.load(x_ptr + base + c, mask=c < C, other=0.0).to(tl.float32)
        tl.store(y_ptr + base + c, x / norm, mask=c < C)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # F.normalize(x, dim=1) on a (batch, dim) tensor: each row divided by max(||row||_2, 1e-12)
        x = x.contiguous()
        C = x.shape[1]
        R = x.shape[0]
        y = torch.empty_like(x)
        if C <= MAX_SINGLE:
            BLOCK = triton.next_power_of_2(C)
            ROWS = max(1, min(16, 4096 // BLOCK))
            warps = 4 if BLOCK <= 2048 else (8 if BLOCK <= 8192 else 16)
            l2norm_rows_kernel[(triton.cdiv(R, ROWS),)](x, y, R, C, 1e-12, ROWS=ROWS, BLOCK=BLOCK, num_warps=warps)
        else:
            l2norm_long_kernel[(R,)](x, y, C, 1e-12, BLOCK=4096, num_warps=8)
        return y
