import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024
BLOCK_R, BLOCK_C = 32, 128


@triton.jit
def rmsnorm_forward_kernel(x_ptr, w_ptr, y_ptr, r_ptr, cols, eps, BLOCK: tl.constexpr):
    # One program per row: r = 1 / sqrt(mean(x^2) + eps) (kept for the backward), then y = x * r * w.
    row = tl.program_id(0)
    base = row.to(tl.int64) * cols
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for c0 in range(0, cols, BLOCK):
        x = tl.load(x_ptr + base + c0 + offs, mask=c0 + offs < cols, other=0.0).to(tl.float32)
        acc += x * x
    r = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / cols + eps)
    tl.store(r_ptr + row, r)
    for c0 in range(0, cols, BLOCK):
        ok = c0 + offs < cols
        x = tl.load(x_ptr + base + c0 + offs, mask=ok, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + c0 + offs, mask=ok, other=0.0).to(tl.float32)
        tl.store(y_ptr + base + c0 + offs, x * r * w, mask=ok)


@triton.jit
def rmsnorm_dx_kernel(x_ptr, w_ptr, r_ptr, g_ptr, dx_ptr, cols, BLOCK: tl.constexpr):
    # dx = r * w * g - x * r^3 * sum(w * g * x) / cols
    row = tl.program_id(0)
    base = row.to(tl.int64) * cols
    offs = tl.arange(0, BLOCK)
    r = tl.load(r_ptr + row).to(tl.float32)
    acc = tl.zeros((BLOCK,), tl.float32)
    for c0 in range(0, cols, BLOCK):
        ok = c0 + offs < cols
        x = tl.load(x_ptr + base + c0 + offs, mask=ok, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + c0 + offs, mask=ok, other=0.0).to(tl.float32)
        g = tl.load(g_ptr + base + c0 + offs, mask=ok, other=0.0).to(tl.float32)
        acc += w * g * x
    k = r * r * r * tl.sum(acc, axis=0) / cols
    for c0 in range(0, cols, BLOCK):
        ok = c0 + offs < cols
        x = tl.load(x_ptr + base + c0 + offs, mask=ok, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + c0 + offs, mask=ok, other=0.0).to(tl.float32)
        g = tl.load(g_ptr + base + c0 + offs, mask=ok, other=0.0).to(tl.float32)
        tl.store(dx_ptr + base + c0 + offs, r * w * g - x * k, mask=ok)


@triton.jit
def rmsnorm_dw_kernel(x_ptr, r_ptr, g_ptr, dw_ptr, rows, cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # dw = column sums of g * x * r
    cs = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    c_ok = cs < cols
    acc = tl.zeros((BLOCK_C,), tl.float32)
    for r0 in range(0, rows, BLOCK_R):
        rs = r0 + tl.arange(0, BLOCK_R)
        r_ok = rs < rows
        mask = r_ok[:, None] & c_ok[None, :]
        offs = rs[:, None].to(tl.int64) * cols + cs[None, :]
        g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + rs, mask=r_ok, other=0.0).to(tl.float32)
        acc += tl.sum(g * x * r[:, None], axis=0)
    tl.store(dw_ptr + cs, acc, mask=c_ok)


class _RMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        x, weight = x.contiguous(), weight.contiguous()
        cols = x.shape[-1]
        rows = x.numel() // cols
        y = torch.empty_like(x)
        rs = torch.empty(rows, dtype=torch.float32, device=x.device)
        rmsnorm_forward_kernel[(rows,)](x, weight, y, rs, cols, float(eps), BLOCK=BLOCK)
        ctx.save_for_backward(x, weight, rs)
        return y

    @staticmethod
    def backward(ctx, grad):
        x, weight, rs = ctx.saved_tensors
        grad = grad.contiguous()
        cols = x.shape[-1]
        rows = x.numel() // cols
        dx = torch.empty_like(x)
        dw = torch.empty_like(weight)
        rmsnorm_dx_kernel[(rows,)](x, weight, rs, grad, dx, cols, BLOCK=BLOCK)
        rmsnorm_dw_kernel[(triton.cdiv(cols, BLOCK_C),)](x, rs, grad, dw, rows, cols, BLOCK_R=BLOCK_R,
                                                         BLOCK_C=BLOCK_C)
        return dx, dw, None


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _RMSNorm.apply(x, self.weight, self.eps)
