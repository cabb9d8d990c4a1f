"""A generated curriculum: KernelBench-format tasks of graded difficulty, each with honest cpp and Triton
solutions, split into disjoint train and held-out sets, and a task sampler driven by recent success.

Families and difficulty (1 = easiest):

| difficulty | family | examples |
|---|---|---|
| 1 | `unary` | Neg, Abs, Exp, Log, Sqrt, Sin, Clamp |
| 2 | `activation` | ReLU, LeakyReLU, GELU (tanh), SiLU, Softplus, Mish, Hardswish |
| 2 | `binary` | Add, Mul, Div, Maximum, SquaredDifference |
| 3 | `fused` (level 2) | relu(a + b), sigmoid(a) * b, silu(a) * b, relu(x)^2 |
| 3 | `row_reduction` | row sum, mean, max, min, L1 / L2 norm, logsumexp, variance |
| 4 | `fused_row` (level 2) | row dot, row MSE, softmax, L2-normalize, centering, RMS scaling |

`curriculum()` builds the tasks in memory (suite `curriculum`, ids like `curriculum/L1/5_Exp`); every
task file has the bundled suite's shape (a `Model`, `get_inputs`, `get_init_inputs`, the `KERNELGYM`
metadata with a small `cpu` size, a category and the difficulty). `write_curriculum(folder)` writes the
task files (`level<N>/<pid>_<Name>.py`) and the solutions (`solutions/<backend>/level<N>/...`): load the
tasks back with `kernelgym.tasks.from_path(folder)`, or use the suite name: `gym.make(...,
suite="curriculum", level=None)`, `resolve_task("curriculum/L1/5_Exp")`.

The split is fixed by the task's name (a hash, stratified by family: about a third of each family is
held out), never by the tasks' order. The held-out tasks are never used for SFT data or RL (the daVinci
trainers drop them); `train_ids()` and `heldout_ids()` give the two id lists.

`SuccessSampler` picks tasks for RL: it starts with the easiest difficulty, unlocks the next one when the
mean recent success rate of the tried tasks of the hardest unlocked difficulty reaches `unlock_at`, and
weights each unlocked task by `p (1 - p)` of its recent success rate p (with a prior for tasks not tried
yet), so tasks the model always or never solves are drawn less. Its state is a plain dict (checkpoints).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelgym.errors import ConfigError
from kernelgym.tasks.task import Task, task_from_source

SUITE = "curriculum"
HELDOUT_FRACTION = 1 / 3
BACKENDS = ("cpp", "triton")


@dataclass(frozen=True)
class Op:
    """One task: the reference expression and the same computation for each backend."""

    name: str
    family: str  # unary | activation | binary | fused | row_reduction | fused_row
    torch: str  # the forward's return expression (x, or a and b)
    cpp: str  # elementwise: a C++ float expression of v (or a, b); reductions: the body of the row loop
    triton: str  # elementwise: a Triton expression of x (or a, b); reductions: the kernel's body
    inputs: str = "signed"  # "signed" (uniform in [-1, 1)) or "positive" (uniform in [0.05, 1.05))
    doc: str = ""

    @property
    def arity(self) -> int:
        return 2 if self.family in ("binary", "fused") or self.name in _TWO_INPUT_ROWS else 1

    @property
    def difficulty(self) -> int:
        return _DIFFICULTY[self.family]

    @property
    def level(self) -> int:
        return 2 if self.family in ("fused", "fused_row") else 1

    @property
    def reduces(self) -> bool:
        return self.family in ("row_reduction", "fused_row")


_DIFFICULTY = {"unary": 1, "activation": 2, "binary": 2, "fused": 3, "row_reduction": 3, "fused_row": 4}
_TWO_INPUT_ROWS = {"RowDot", "RowMSE"}
_CATEGORY = {"unary": "elementwise", "activation": "activation", "binary": "elementwise",
             "fused": "elementwise", "row_reduction": "reduction", "fused_row": "reduction"}

# Triton has no tanh in tl.*: tanh(z) = 2 sigmoid(2z) - 1.
_TANH = "(2.0 * tl.sigmoid(2.0 * ({z})) - 1.0)"
_SOFTPLUS_CPP = "({z} > 20.0f ? {z} : std::log1p(std::exp({z})))"
_SOFTPLUS_TL = "tl.where({z} > 20.0, {z}, tl.log(1.0 + tl.exp({z})))"
_GELU_INNER = "0.7978845608028654 * ({z} + 0.044715 * {z} * {z} * {z})"


def _tanh_tl(z: str) -> str:
    return _TANH.format(z=z)


def _elementwise() -> list[Op]:
    return [*_unary(), *_activations(), *_binary()]


def _unary() -> list[Op]:
    """Difficulty 1: one math function."""
    u = "unary"
    return [
        Op("Neg", u, "-x", "-v", "-x"),
        Op("Abs", u, "torch.abs(x)", "std::fabs(v)", "tl.abs(x)"),
        Op("Square", u, "x * x", "v * v", "x * x"),
        Op("Cube", u, "x * x * x", "v * v * v", "x * x * x"),
        Op("Exp", u, "torch.exp(x)", "std::exp(v)", "tl.exp(x)"),
        Op("Expm1", u, "torch.expm1(x)", "std::expm1(v)", "tl.exp(x) - 1.0"),
        Op("Log", u, "torch.log(x)", "std::log(v)", "tl.log(x)", "positive"),
        Op("Log1p", u, "torch.log1p(x)", "std::log1p(v)", "tl.log(1.0 + x)", "positive"),
        Op("Sqrt", u, "torch.sqrt(x)", "std::sqrt(v)", "tl.sqrt(x)", "positive"),
        Op("Rsqrt", u, "torch.rsqrt(x)", "1.0f / std::sqrt(v)", "1.0 / tl.sqrt(x)", "positive"),
        Op("Reciprocal", u, "torch.reciprocal(x)", "1.0f / v", "1.0 / x", "positive"),
        Op("Sin", u, "torch.sin(x)", "std::sin(v)", "tl.sin(x)"),
        Op("Cos", u, "torch.cos(x)", "std::cos(v)", "tl.cos(x)"),
        Op("Floor", u, "torch.floor(x * 4.0)", "std::floor(v * 4.0f)", "tl.floor(x * 4.0)"),
        Op("ScaleShift", u, "x * 2.5 + 0.5", "v * 2.5f + 0.5f", "x * 2.5 + 0.5"),
        Op("Clamp", u, "torch.clamp(x, -0.5, 0.5)", "std::fmin(std::fmax(v, -0.5f), 0.5f)",
           "tl.minimum(tl.maximum(x, -0.5), 0.5)"),
    ]


def _activations() -> list[Op]:
    """Difficulty 2: activations."""
    a = "activation"
    selu = (1.6732632423543772, 1.0507009873554805)
    return [
        Op("ReLU", a, "torch.relu(x)", "v > 0.0f ? v : 0.0f", "tl.maximum(x, 0.0)"),
        Op("LeakyReLU", a, "torch.nn.functional.leaky_relu(x, 0.01)", "v > 0.0f ? v : 0.01f * v",
           "tl.where(x > 0, x, 0.01 * x)"),
        Op("ELU", a, "torch.nn.functional.elu(x)", "v > 0.0f ? v : std::expm1(v)",
           "tl.where(x > 0, x, tl.exp(x) - 1.0)"),
        Op("SELU", a, "torch.selu(x)", f"{selu[1]}f * (v > 0.0f ? v : {selu[0]}f * std::expm1(v))",
           f"{selu[1]} * tl.where(x > 0, x, {selu[0]} * (tl.exp(x) - 1.0))"),
        Op("GELUTanh", a, "torch.nn.functional.gelu(x, approximate='tanh')",
           f"0.5f * v * (1.0f + std::tanh({_GELU_INNER.format(z='v')}))",
           f"0.5 * x * (1.0 + {_tanh_tl(_GELU_INNER.format(z='x'))})"),
        Op("SiLU", a, "torch.nn.functional.silu(x)", "v / (1.0f + std::exp(-v))", "x * tl.sigmoid(x)"),
        Op("Sigmoid", a, "torch.sigmoid(x)", "1.0f / (1.0f + std::exp(-v))", "tl.sigmoid(x)"),
        Op("Tanh", a, "torch.tanh(x)", "std::tanh(v)", _tanh_tl("x")),
        Op("Softplus", a, "torch.nn.functional.softplus(x)", _SOFTPLUS_CPP.format(z="v"),
           _SOFTPLUS_TL.format(z="x")),
        Op("Mish", a, "torch.nn.functional.mish(x)", f"v * std::tanh({_SOFTPLUS_CPP.format(z='v')})",
           f"x * {_tanh_tl(_SOFTPLUS_TL.format(z='x'))}"),
        Op("Hardtanh", a, "torch.nn.functional.hardtanh(x)", "std::fmin(std::fmax(v, -1.0f), 1.0f)",
           "tl.minimum(tl.maximum(x, -1.0), 1.0)"),
        Op("Hardsigmoid", a, "torch.nn.functional.hardsigmoid(x)",
           "std::fmin(std::fmax(v + 3.0f, 0.0f), 6.0f) / 6.0f",
           "tl.minimum(tl.maximum(x + 3.0, 0.0), 6.0) / 6.0"),
        Op("Hardswish", a, "torch.nn.functional.hardswish(x)",
           "v * std::fmin(std::fmax(v + 3.0f, 0.0f), 6.0f) / 6.0f",
           "x * tl.minimum(tl.maximum(x + 3.0, 0.0), 6.0) / 6.0"),
        Op("ReLU6", a, "torch.nn.functional.relu6(x)", "std::fmin(std::fmax(v, 0.0f), 6.0f)",
           "tl.minimum(tl.maximum(x, 0.0), 6.0)"),
        Op("Softsign", a, "torch.nn.functional.softsign(x)", "v / (1.0f + std::fabs(v))",
           "x / (1.0 + tl.abs(x))"),
        Op("Tanhshrink", a, "torch.nn.functional.tanhshrink(x)", "v - std::tanh(v)", f"x - {_tanh_tl('x')}"),
        Op("LogSigmoid", a, "torch.nn.functional.logsigmoid(x)",
           "std::fmin(v, 0.0f) - std::log1p(std::exp(-std::fabs(v)))",
           "tl.minimum(x, 0.0) - tl.log(1.0 + tl.exp(-tl.abs(x)))"),
    ]


def _binary() -> list[Op]:
    """Difficulty 2: two inputs of one shape."""
    b = "binary"
    return [
        Op("Add", b, "a + b", "a + b", "a + b"),
        Op("Sub", b, "a - b", "a - b", "a - b"),
        Op("Mul", b, "a * b", "a * b", "a * b"),
        Op("Div", b, "a / b", "a / b", "a / b", "positive"),
        Op("Maximum", b, "torch.maximum(a, b)", "std::fmax(a, b)", "tl.maximum(a, b)"),
        Op("Minimum", b, "torch.minimum(a, b)", "std::fmin(a, b)", "tl.minimum(a, b)"),
        Op("SquaredDifference", b, "(a - b) * (a - b)", "(a - b) * (a - b)", "(a - b) * (a - b)"),
        Op("AbsDifference", b, "torch.abs(a - b)", "std::fabs(a - b)", "tl.abs(a - b)"),
        Op("WeightedSum", b, "0.7 * a + 0.3 * b", "0.7f * a + 0.3f * b", "0.7 * a + 0.3 * b"),
    ]


def _fused() -> list[Op]:
    f = "fused"
    return [
        Op("AddReLU", f, "torch.relu(a + b)", "std::fmax(a + b, 0.0f)", "tl.maximum(a + b, 0.0)"),
        Op("SigmoidGate", f, "torch.sigmoid(a) * b", "b / (1.0f + std::exp(-a))", "tl.sigmoid(a) * b"),
        Op("TanhGate", f, "torch.tanh(a) * b", "std::tanh(a) * b", f"{_tanh_tl('a')} * b"),
        Op("SiLUGate", f, "torch.nn.functional.silu(a) * b", "a / (1.0f + std::exp(-a)) * b",
           "a * tl.sigmoid(a) * b"),
        Op("AddSigmoid", f, "torch.sigmoid(a + b)", "1.0f / (1.0f + std::exp(-(a + b)))",
           "tl.sigmoid(a + b)"),
        Op("MulTanh", f, "torch.tanh(a * b)", "std::tanh(a * b)", _tanh_tl("a * b")),
        Op("ClampMul", f, "torch.clamp(a * b, -0.25, 0.25)", "std::fmin(std::fmax(a * b, -0.25f), 0.25f)",
           "tl.minimum(tl.maximum(a * b, -0.25), 0.25)"),
        Op("SquareAdd", f, "a * a + b", "a * a + b", "a * a + b"),
        Op("ExpMul", f, "torch.exp(a) * b", "std::exp(a) * b", "tl.exp(a) * b"),
        Op("SoftplusAdd", f, "torch.nn.functional.softplus(a) + b", f"{_SOFTPLUS_CPP.format(z='a')} + b",
           f"{_SOFTPLUS_TL.format(z='a')} + b"),
    ]


# Row reductions: the C++ body runs once per row with `row` (the row's input), `cols`, and writes y[r] (or
# `out`, the row's output, for row-shaped results); the Triton body runs in one program per row with
# `base` (x_ptr + row * cols), `cols`, `BLOCK` and writes through y_ptr.
_SUM_CPP = """float acc = 0.0f;
#pragma omp simd reduction(+:acc)
for (int64_t c = 0; c < cols; ++c) acc += {term};
y[r] = {result};"""
_SUM_TL = """acc = tl.zeros([BLOCK], dtype=tl.float32)
for start in range(0, cols, BLOCK):
    offs = start + tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(base + offs, mask=mask, other=0.0)
    acc += tl.where(mask, {term}, 0.0)
total = tl.sum(acc, axis=0)
tl.store(y_ptr + row, {result})"""
_EXT_CPP = """float acc = row[0];
#pragma omp simd reduction({op}:acc)
for (int64_t c = 1; c < cols; ++c) acc = std::f{op}(acc, row[c]);
y[r] = acc;"""
_EXT_TL = """acc = tl.full([BLOCK], {init}, tl.float32)
for start in range(0, cols, BLOCK):
    offs = start + tl.arange(0, BLOCK)
    x = tl.load(base + offs, mask=offs < cols, other={init})
    acc = tl.{op}imum(acc, x)
tl.store(y_ptr + row, tl.{op}(acc, axis=0))"""
_LSE_CPP = """float m = row[0];
#pragma omp simd reduction(max:m)
for (int64_t c = 1; c < cols; ++c) m = std::fmax(m, row[c]);
float s = 0.0f;
#pragma omp simd reduction(+:s)
for (int64_t c = 0; c < cols; ++c) s += std::exp(row[c] - m);
y[r] = m + std::log(s);"""
_LSE_TL = """m_acc = tl.full([BLOCK], float("-inf"), tl.float32)
for start in range(0, cols, BLOCK):
    offs = start + tl.arange(0, BLOCK)
    x = tl.load(base + offs, mask=offs < cols, other=float("-inf"))
    m_acc = tl.maximum(m_acc, x)
m = tl.max(m_acc, axis=0)
s_acc = tl.zeros([BLOCK], dtype=tl.float32)
for start in range(0, cols, BLOCK):
    offs = start + tl.arange(0, BLOCK)
    x = tl.load(base + offs, mask=offs < cols, other=float("-inf"))
    s_acc += tl.exp(x - m)
tl.store(y_ptr + row, m + tl.log(tl.sum(s_acc, axis=0)))"""
_VAR_CPP = """float s = 0.0f;
#pragma omp simd reduction(+:s)
for (int64_t c = 0; c < cols; ++c) s += row[c];
const float mean = s / cols;
float q = 0.0f;
#pragma omp simd reduction(+:q)
for (int64_t c = 0; c < cols; ++c) q += (row[c] - mean) * (row[c] - mean);
y[r] = q / (cols - 1);"""
_VAR_TL = """s_acc = tl.zeros([BLOCK], dtype=tl.float32)
for start in range(0, cols, BLOCK):
    offs = start + tl.arange(0, BLOCK)
    s_acc += tl.load(base + offs, mask=offs < cols, other=0.0)
mean = tl.sum(s_acc, axis=0) / cols
q_acc = tl.zeros([BLOCK], dtype=tl.float32)
for start in range(0, cols, BLOCK):
    offs = start + tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(base + offs, mask=mask, other=0.0)
    d = tl.where(mask, x - mean, 0.0)
    q_acc += d * d
tl.store(y_ptr + row, tl.sum(q_acc, axis=0) / (cols - 1))"""
# Row-shaped results: a reduction, then a second sweep that writes the row.
_ROW_SCALE_CPP = """float acc = 0.0f;
#pragma omp simd reduction(+:acc)
for (int64_t c = 0; c < cols; ++c) acc += {term};
const float k = {k};
#pragma omp simd
for (int64_t c = 0; c < cols; ++c) out[c] = {write};"""
_ROW_SCALE_TL = """acc = tl.zeros([BLOCK], dtype=tl.float32)
for start in range(0, cols, BLOCK):
    offs = start + tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(base + offs, mask=mask, other=0.0)
    acc += tl.where(mask, {term}, 0.0)
k = {k}
for start in range(0, cols, BLOCK):
    offs = start + tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(base + offs, mask=mask, other=0.0)
    tl.store(y_ptr + row * cols + offs, {write}, mask=mask)"""
_SOFTMAX_CPP = """float m = row[0];
#pragma omp simd reduction(max:m)
for (int64_t c = 1; c < cols; ++c) m = std::fmax(m, row[c]);
float s = 0.0f;
for (int64_t c = 0; c < cols; ++c) { out[c] = std::exp(row[c] - m); s += out[c]; }
const float inv = 1.0f / s;
#pragma omp simd
for (int64_t c = 0; c < cols; ++c) out[c] *= inv;"""
_SOFTMAX_TL = """m_acc = tl.full([BLOCK], float("-inf"), tl.float32)
for start in range(0, cols, BLOCK):
    offs = start + tl.arange(0, BLOCK)
    x = tl.load(base + offs, mask=offs < cols, other=float("-inf"))
    m_acc = tl.maximum(m_acc, x)
m = tl.max(m_acc, axis=0)
s_acc = tl.zeros([BLOCK], dtype=tl.float32)
for start in range(0, cols, BLOCK):
    offs = start + tl.arange(0, BLOCK)
    x = tl.load(base + offs, mask=offs < cols, other=float("-inf"))
    s_acc += tl.exp(x - m)
inv = 1.0 / tl.sum(s_acc, axis=0)
for start in range(0, cols, BLOCK):
    offs = start + tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(base + offs, mask=mask, other=float("-inf"))
    tl.store(y_ptr + row * cols + offs, tl.exp(x - m) * inv, mask=mask)"""
# Two-input row reductions: `row_a`, `row_b` in C++; `base_a`, `base_b` in Triton.
_PAIR_CPP = """float acc = 0.0f;
#pragma omp simd reduction(+:acc)
for (int64_t c = 0; c < cols; ++c) acc += {term};
y[r] = {result};"""
_PAIR_TL = """acc = tl.zeros([BLOCK], dtype=tl.float32)
for start in range(0, cols, BLOCK):
    offs = start + tl.arange(0, BLOCK)
    mask = offs < cols
    a = tl.load(base_a + offs, mask=mask, other=0.0)
    b = tl.load(base_b + offs, mask=mask, other=0.0)
    acc += {term}
total = tl.sum(acc, axis=0)
tl.store(y_ptr + row, {result})"""


def _sum(term_c: str, term_t: str, result_c: str = "acc", result_t: str = "total") -> tuple[str, str]:
    return (_SUM_CPP.format(term=term_c, result=result_c), _SUM_TL.format(term=term_t, result=result_t))


def _reductions() -> list[Op]:
    r, f = "row_reduction", "fused_row"
    ops = [
        Op("RowSum", r, "torch.sum(x, dim=-1)", *_sum("row[c]", "x")),
        Op("RowMean", r, "torch.mean(x, dim=-1)", *_sum("row[c]", "x", "acc / cols", "total / cols")),
        Op("RowMax", r, "torch.amax(x, dim=-1)", _EXT_CPP.format(op="max"),
           _EXT_TL.format(op="max", init='float("-inf")')),
        Op("RowMin", r, "torch.amin(x, dim=-1)", _EXT_CPP.format(op="min"),
           _EXT_TL.format(op="min", init='float("inf")')),
        Op("RowSumSquares", r, "torch.sum(x * x, dim=-1)", *_sum("row[c] * row[c]", "x * x")),
        Op("RowL1Norm", r, "torch.sum(torch.abs(x), dim=-1)", *_sum("std::fabs(row[c])", "tl.abs(x)")),
        Op("RowL2Norm", r, "torch.linalg.vector_norm(x, dim=-1)",
           *_sum("row[c] * row[c]", "x * x", "std::sqrt(acc)", "tl.sqrt(total)")),
        Op("RowLogSumExp", r, "torch.logsumexp(x, dim=-1)", _LSE_CPP, _LSE_TL),
        Op("RowVar", r, "torch.var(x, dim=-1)", _VAR_CPP, _VAR_TL),
        Op("RowReLUSum", f, "torch.sum(torch.relu(x), dim=-1)", *_sum("std::fmax(row[c], 0.0f)",
                                                                        "tl.maximum(x, 0.0)")),
        Op("RowExpMean", f, "torch.mean(torch.exp(x), dim=-1)",
           *_sum("std::exp(row[c])", "tl.exp(x)", "acc / cols", "total / cols")),
        Op("RowDot", f, "torch.sum(a * b, dim=-1)",
           _PAIR_CPP.format(term="row_a[c] * row_b[c]", result="acc"),
           _PAIR_TL.format(term="a * b", result="total")),
        Op("RowMSE", f, "torch.mean((a - b) * (a - b), dim=-1)",
           _PAIR_CPP.format(term="(row_a[c] - row_b[c]) * (row_a[c] - row_b[c])", result="acc / cols"),
           _PAIR_TL.format(term="(a - b) * (a - b)", result="total / cols")),
        Op("RowSoftmax", f, "torch.softmax(x, dim=-1)", _SOFTMAX_CPP, _SOFTMAX_TL),
        Op("RowL2Normalize", f, "x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)",
           _ROW_SCALE_CPP.format(term="row[c] * row[c]", k="1.0f / std::sqrt(acc)", write="row[c] * k"),
           _ROW_SCALE_TL.format(term="x * x", k="1.0 / tl.sqrt(tl.sum(acc, axis=0))", write="x * k")),
        Op("RowCenter", f, "x - torch.mean(x, dim=-1, keepdim=True)",
           _ROW_SCALE_CPP.format(term="row[c]", k="acc / cols", write="row[c] - k"),
           _ROW_SCALE_TL.format(term="x", k="tl.sum(acc, axis=0) / cols", write="x - k")),
        Op("RowRMSScale", f, "x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + 1e-6)",
           _ROW_SCALE_CPP.format(term="row[c] * row[c]", k="1.0f / std::sqrt(acc / cols + 1e-6f)",
                                 write="row[c] * k"),
           _ROW_SCALE_TL.format(term="x * x", k="1.0 / tl.sqrt(tl.sum(acc, axis=0) / cols + 1e-6)",
                                write="x * k")),
    ]
    return ops


def ops() -> list[Op]:
    """Every op of the curriculum, easiest family first."""
    found = _elementwise() + _fused() + _reductions()
    return sorted(found, key=lambda op: (op.difficulty, list(_DIFFICULTY).index(op.family)))


_ROW_SHAPED = {"RowSoftmax", "RowL2Normalize", "RowCenter", "RowRMSScale"}


# Task files -------------------------------------------------------------------------------------------------

_TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """{doc}"""

    def __init__(self):
        super().__init__()

    def forward(self, {args}) -> torch.Tensor:
        return {expr}


batch_size = 4096
dim = 16384


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {meta}
'''


def _names(op: Op) -> list[str]:
    return ["a", "b"] if op.arity == 2 else ["x"]


def task_source(op: Op) -> str:
    draw = "torch.rand(batch_size, dim) " + ("+ 0.05" if op.inputs == "positive" else "* 2 - 1")
    meta = {"category": _CATEGORY[op.family], "sizes": {"cpu": {"batch_size": 128, "dim": 4096}},
            "difficulty": op.difficulty, "family": op.family}
    if op.inputs == "positive":
        meta["perturb"] = "positive"
    what = {"unary": "Elementwise", "activation": "Elementwise activation", "binary": "Elementwise binary",
            "fused": "Fused elementwise", "row_reduction": "Row reduction over the last dim",
            "fused_row": "Fused row operation over the last dim"}[op.family]
    doc = op.doc or f"{what}: {op.torch}."
    return _TASK.format(doc=doc, args=", ".join(f"{n}: torch.Tensor" for n in _names(op)), expr=op.torch,
                        inputs=", ".join([draw] * op.arity), meta=json.dumps(meta))


def _fn(op: Op) -> str:
    return op.name.lower()


def _indent(text: str, spaces: int) -> str:
    pad = " " * spaces
    return "\n".join(pad + line if line.strip() else line for line in text.splitlines())


# cpp solutions ---------------------------------------------------------------------------------------------

_CPP_HEAD = '''import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

_lib = load_cpp(r"""
#include <cmath>
#include <cstdint>
{kernel}
""")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, {args}) -> torch.Tensor:
{body}
'''


def cpp_solution(op: Op) -> str:
    fn = f"{_fn(op)}_forward"
    names = _names(op)
    contiguous = "\n".join(f"        {n} = {n}.contiguous()" for n in names)
    if not op.reduces:
        if op.arity == 2:
            params, load = "const float* xa, const float* xb", "const float a = xa[i], b = xb[i];"
        else:
            params, load = "const float* x", "const float v = x[i];"
        kernel = (f'extern "C" void {fn}({params}, float* y, int64_t n) {{\n'
                  f"    #pragma omp parallel for simd schedule(static)\n"
                  f"    for (int64_t i = 0; i < n; ++i) {{\n"
                  f"        {load}\n        y[i] = {op.cpp};\n    }}\n}}")
        body = (f"{contiguous}\n        y = torch.empty_like({names[0]})\n"
                f"        _lib.{fn}({', '.join(names)}, y, {names[0]}.numel())\n        return y")
    else:
        if op.arity == 2:
            params, rows = "const float* a, const float* b", ("        const float* row_a = a + r * cols;\n"
                                                              "        const float* row_b = b + r * cols;\n")
        else:
            params, rows = "const float* x", "        const float* row = x + r * cols;\n"
        if op.name in _ROW_SHAPED:
            rows += "        float* out = y + r * cols;\n"
        kernel = (f'extern "C" void {fn}({params}, float* y, int64_t rows, int64_t cols) {{\n'
                  f"    #pragma omp parallel for schedule(static)\n"
                  f"    for (int64_t r = 0; r < rows; ++r) {{\n{rows}{_indent(op.cpp, 8)}\n    }}\n}}")
        first = names[0]
        shape = f"{first}.shape" if op.name in _ROW_SHAPED else f"{first}.shape[:-1]"
        body = (f"{contiguous}\n        cols = {first}.shape[-1]\n"
                f"        y = torch.empty({shape}, dtype={first}.dtype, device={first}.device)\n"
                f"        _lib.{fn}({', '.join(names)}, y, {first}.numel() // cols, cols)\n        return y")
    return _CPP_HEAD.format(kernel=kernel, args=", ".join(names), body=body)


# Triton solutions ------------------------------------------------------------------------------------------

_TRITON_HEAD = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def {fn}_kernel({params}):
{kernel}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, {args}) -> torch.Tensor:
{body}
'''


def triton_solution(op: Op) -> str:
    fn = _fn(op)
    names = _names(op)
    contiguous = "\n".join(f"        {n} = {n}.contiguous()" for n in names)
    ptrs = ", ".join(f"{n}_ptr" for n in names)
    if not op.reduces:
        loads = "\n".join(f"    {n} = tl.load({n}_ptr + offsets, mask=mask)" for n in names)
        kernel = ("    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n    mask = offsets < n\n"
                  f"{loads}\n    tl.store(y_ptr + offsets, {op.triton}, mask=mask)")
        params = f"{ptrs}, y_ptr, n, BLOCK: tl.constexpr"
        body = (f"{contiguous}\n        y = torch.empty_like({names[0]})\n        n = y.numel()\n"
                f"        BLOCK = 4096\n"
                f"        {fn}_kernel[(triton.cdiv(n, BLOCK),)]({', '.join(names)}, y, n, BLOCK=BLOCK)\n"
                "        return y")
    else:
        if op.arity == 2:
            bases = "    base_a = a_ptr + row * cols\n    base_b = b_ptr + row * cols\n"
        else:
            bases = "    base = x_ptr + row * cols\n"
        kernel = f"    row = tl.program_id(0)\n{bases}{_indent(op.triton, 4)}"
        params = f"{ptrs}, y_ptr, cols, BLOCK: tl.constexpr"
        first = names[0]
        shape = f"{first}.shape" if op.name in _ROW_SHAPED else f"{first}.shape[:-1]"
        body = (f"{contiguous}\n        cols = {first}.shape[-1]\n"
                f"        y = torch.empty({shape}, dtype={first}.dtype, device={first}.device)\n"
                f"        rows = {first}.numel() // cols\n"
                f"        BLOCK = min(triton.next_power_of_2(cols), 2048)\n"
                f"        {fn}_kernel[(rows,)]({', '.join(names)}, y, cols, BLOCK=BLOCK)\n        return y")
    return _TRITON_HEAD.format(fn=fn, params=params, kernel=kernel, args=", ".join(names), body=body)


# The curriculum ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CurriculumTask:
    task: Task
    op: Op
    split: str  # "train" | "heldout"
    solutions: dict[str, str] = field(compare=False, hash=False)

    @property
    def id(self) -> str:
        return self.task.id

    @property
    def difficulty(self) -> int:
        return self.op.difficulty

    @property
    def file_name(self) -> str:
        return f"{self.task.problem_id}_{self.task.name}.py"


def _rank(name: str) -> str:
    return hashlib.sha256(f"kernelgym-curriculum:{name}".encode()).hexdigest()


def splits(all_ops: Sequence[Op], fraction: float = HELDOUT_FRACTION) -> dict[str, str]:
    """name -> "train" | "heldout": per family, the names first by hash are held out (at least one)."""
    out: dict[str, str] = {}
    for family in _DIFFICULTY:
        names = sorted((op.name for op in all_ops if op.family == family), key=_rank)
        held = max(1, round(len(names) * fraction)) if len(names) > 1 else 0
        for i, name in enumerate(names):
            out[name] = "heldout" if i < held else "train"
    return out


def curriculum(split: str | None = None) -> list[CurriculumTask]:
    """The generated tasks (of one split: "train" or "heldout", or all), easiest first."""
    if split not in (None, "train", "heldout"):
        raise ConfigError(f"split must be 'train', 'heldout' or None, not {split!r}")
    all_ops = ops()
    assigned = splits(all_ops)
    counters = {1: 0, 2: 0}
    out = []
    for op in all_ops:
        counters[op.level] += 1
        pid = counters[op.level]
        source = task_source(op)
        task = task_from_source(source, suite=SUITE, level=op.level, file_name=f"{pid}_{op.name}.py")
        item = CurriculumTask(task, op, assigned[op.name],
                              {"cpp": cpp_solution(op), "triton": triton_solution(op)})
        if split is None or item.split == split:
            out.append(item)
    return out


def curriculum_tasks(split: str | None = None):
    """The tasks as a TaskSet (for `gym.make(..., tasks=...)`-style callers and `TaskSet.filter`)."""
    from kernelgym.tasks.taskset import TaskSet

    return TaskSet.of([c.task for c in curriculum(split)], f"curriculum {split or 'all'}")


def train_ids() -> list[str]:
    return [c.id for c in curriculum("train")]


def heldout_ids() -> list[str]:
    return [c.id for c in curriculum("heldout")]


def write_curriculum(folder: str | Path, backends: Iterable[str] = BACKENDS) -> Path:
    """Task files as `level<N>/<pid>_<Name>.py`, solutions as `solutions/<backend>/level<N>/...`, and
    `splits.json` (the train and held-out file names)."""
    root = Path(folder)
    items = curriculum()
    for item in items:
        level = f"level{item.task.level}"
        (root / level).mkdir(parents=True, exist_ok=True)
        (root / level / item.file_name).write_text(item.task.source)
        for backend in backends:
            target = root / "solutions" / backend / level
            target.mkdir(parents=True, exist_ok=True)
            (target / item.file_name).write_text(item.solutions[backend])
    layout = {split: [f"level{i.task.level}/{i.file_name}" for i in items if i.split == split]
              for split in ("train", "heldout")}
    (root / "splits.json").write_text(json.dumps(layout, indent=1))
    return root


# Sampling tasks by recent success ---------------------------------------------------------------------------

@dataclass
class SuccessSampler:
    """Draws tasks for RL: easiest difficulty first, the next unlocked by recent success, weighted by
    p (1 - p) of each task's recent success rate p (`window` latest outcomes, a Beta(prior) pseudo-count)."""

    difficulty: dict[str, int]  # task id -> difficulty
    window: int = 16
    unlock_at: float = 0.3  # mean recent success at the hardest unlocked difficulty that opens the next
    prior: tuple[float, float] = (1.0, 1.0)  # pseudo successes, failures of a task not tried yet
    floor: float = 0.05  # every unlocked task keeps at least this weight
    history: dict[str, deque] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.difficulty:
            raise ConfigError("SuccessSampler needs at least one task")
        self.history = {k: deque(v, maxlen=self.window) for k, v in self.history.items()}

    @classmethod
    def for_curriculum(cls, items: Sequence[CurriculumTask], **kw) -> SuccessSampler:
        return cls({i.id: i.difficulty for i in items}, **kw)

    def rate(self, task_id: str) -> float:
        seen = self.history.get(task_id, ())
        a, b = self.prior
        return (sum(seen) + a) / (len(seen) + a + b)

    def unlocked(self) -> int:
        """The highest difficulty drawn from now."""
        levels = sorted(set(self.difficulty.values()))
        current = levels[0]
        for nxt in levels[1:]:  # the frontier difficulty's tried tasks must succeed often enough
            tried = [t for t, d in self.difficulty.items() if d == current and self.history.get(t)]
            if not tried:
                break
            mean = sum(sum(self.history[t]) / len(self.history[t]) for t in tried) / len(tried)
            if mean < self.unlock_at:
                break
            current = nxt
        return current

    def weights(self) -> dict[str, float]:
        top = self.unlocked()
        return {t: self.floor + (p := self.rate(t)) * (1 - p) for t, d in self.difficulty.items() if d <= top}

    def sample(self, k: int, rng: random.Random) -> list[str]:
        """k distinct task ids (fewer when fewer are unlocked), drawn by weight without replacement."""
        pool = self.weights()
        chosen: list[str] = []
        while pool and len(chosen) < k:
            ids = sorted(pool)
            pick = rng.choices(ids, weights=[pool[i] for i in ids])[0]
            chosen.append(pick)
            del pool[pick]
        return chosen

    def update(self, task_id: str, success: bool) -> None:
        self.history.setdefault(task_id, deque(maxlen=self.window)).append(1 if success else 0)

    def state(self) -> dict[str, Any]:
        return {"history": {k: list(v) for k, v in self.history.items()}}

    def load(self, state: dict[str, Any]) -> None:
        self.history = {k: deque(v, maxlen=self.window) for k, v in state.get("history", {}).items()}


def success_rates(sampler: SuccessSampler) -> dict[str, float]:
    """Each tried task's raw recent success rate (no prior), for logs."""
    return {t: sum(h) / len(h) for t, h in sampler.history.items() if h}


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m kernelgym.tasks.curriculum write DIR` (to judge its solutions:
    `kernelgym examples --suite curriculum --size cpu`)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m kernelgym.tasks.curriculum",
                                     description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    write = sub.add_parser("write", help="write the task files, solutions and splits.json")
    write.add_argument("folder")
    args = parser.parse_args(argv)
    print(write_curriculum(args.folder))
    return 0



__all__ = ["BACKENDS", "SUITE", "CurriculumTask", "Op", "SuccessSampler", "cpp_solution", "curriculum",
           "curriculum_tasks", "heldout_ids", "main", "ops", "splits", "success_rates",
           "task_source", "train_ids", "triton_solution", "write_curriculum"]


if __name__ == "__main__":
    raise SystemExit(main())
