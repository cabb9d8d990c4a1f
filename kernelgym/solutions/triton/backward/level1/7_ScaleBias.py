import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 4096
BLOCK_R, BLOCK_C = 32, 128


@triton.jit
def scale_bias_forward_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n, cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    c = offs % cols
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + c, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, x * w + b, mask=mask)


@triton.jit
def scale_bias_dx_kernel(g_ptr, w_ptr, dx_ptr, n, cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs % cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(dx_ptr + offs, g * w, mask=mask)


@triton.jit
def scale_bias_dwdb_kernel(x_ptr, g_ptr, dw_ptr, db_ptr, rows, cols, BLOCK_R: tl.constexpr,
                           BLOCK_C: tl.constexpr):
    # dw = column sums of g * x, db = column sums of g: one program per block of columns
    cs = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    c_ok = cs < cols
    acc_w = tl.zeros((BLOCK_C,), tl.float32)
    acc_b = tl.zeros((BLOCK_C,), tl.float32)
    for r0 in range(0, rows, BLOCK_R):
        rs = r0 + tl.arange(0, BLOCK_R)
        mask = (rs < rows)[:, None] & c_ok[None, :]
        offs = rs[:, None].to(tl.int64) * cols + cs[None, :]
        g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        acc_w += tl.sum(g * x, axis=0)
        acc_b += tl.sum(g, axis=0)
    tl.store(dw_ptr + cs, acc_w, mask=c_ok)
    tl.store(db_ptr + cs, acc_b, mask=c_ok)


class _ScaleBias(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        x, weight, bias = x.contiguous(), weight.contiguous(), bias.contiguous()
        y = torch.empty_like(x)
        n, cols = x.numel(), x.shape[-1]
        scale_bias_forward_kernel[(triton.cdiv(n, BLOCK),)](x, weight, bias, y, n, cols, BLOCK=BLOCK)
        ctx.save_for_backward(x, weight)
        return y

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        grad = grad.contiguous()
        n, cols = x.numel(), x.shape[-1]
        dx = torch.empty_like(x)
        dw = torch.empty_like(weight)
        db = torch.empty_like(weight)
        scale_bias_dx_kernel[(triton.cdiv(n, BLOCK),)](grad, weight, dx, n, cols, BLOCK=BLOCK)
        scale_bias_dwdb_kernel[(triton.cdiv(cols, BLOCK_C),)](x, grad, dw, db, n // cols, cols,
                                                              BLOCK_R=BLOCK_R, BLOCK_C=BLOCK_C)
        return dx, dw, db


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim))
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ScaleBias.apply(x, self.weight, self.bias)
