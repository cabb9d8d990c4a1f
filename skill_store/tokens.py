"""Tokenization shared by skill documents and task queries.

Code and prose are mixed (`nn.Conv2d`, `__shfl_down_sync`, "shared-memory tiling"), so identifiers are split
on dots, underscores, CamelCase and letter/digit boundaries; the whole identifier is kept as well, so an exact
name still matches best. A small domain vocabulary maps spellings of one idea onto shared tokens (GEMM,
matmul and nn.Linear are all matrix products); both sides go through the same function, so this acts as
normalization rather than as query expansion.
"""

from __future__ import annotations

import re
from functools import lru_cache

_WORD = re.compile(r"[A-Za-z0-9]+")
# CamelCase and digit boundaries: "BatchNorm2d" -> Batch, Norm, 2d; "HTTPServer" -> HTTP, Server.
_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+[a-z]?")
_DIM_SUFFIX = re.compile(r"^([a-z]{3,})\d[a-z]?$")

# Python, PyTorch-module boilerplate and English glue: present in every task, they only add noise.
STOPWORDS = frozenset(
    """
a an and are as at be by for from has have if in into is it its of on or that the this to was were will with
we you your our can use used using uses via each per one two all any not no do does so than then there these
those which while when where how what also more most less only just other such up out over about after before
def class return import self super init forward torch nn functional f np numpy module model get inputs
input output outputs none true false x y z out tensor tensors float32 int64 dtype device cuda cpu kernelgym
randn rand zeros ones empty arange list tuple int float bool dim dims size shape view reshape contiguous item
new value values result
""".split()
)

# Spellings of one concept -> tokens added alongside (never instead of) the original token.
ALIASES: dict[str, tuple[str, ...]] = {
    "gemm": ("matmul",),
    "mm": ("matmul",),
    "bmm": ("matmul", "batched"),
    "addmm": ("matmul", "bias"),
    "baddbmm": ("matmul", "batched"),
    "matmul": ("gemm",),
    "linear": ("matmul", "gemm"),
    "dense": ("matmul",),
    "einsum": ("matmul",),
    "mlp": ("matmul", "gemm"),
    "matvec": ("matmul", "gemv"),
    "mv": ("matmul", "gemv"),
    "gemv": ("matmul",),
    "convolution": ("conv",),
    "convolutional": ("conv",),
    "conv1d": ("conv",),
    "conv2d": ("conv",),
    "conv3d": ("conv",),
    "convtranspose1d": ("conv", "transpose"),
    "convtranspose2d": ("conv", "transpose"),
    "convtranspose3d": ("conv", "transpose"),
    "deconv": ("conv", "transpose"),
    "depthwise": ("conv",),
    "normalization": ("norm",),
    "normalize": ("norm",),
    "normalized": ("norm",),
    "normalizes": ("norm",),
    "layernorm": ("norm", "layer"),
    "batchnorm": ("norm", "batch"),
    "groupnorm": ("norm", "group"),
    "instancenorm": ("norm", "instance"),
    "rmsnorm": ("norm", "rms"),
    "var": ("variance",),
    "std": ("variance",),
    "variance": ("var",),
    "reduction": ("reduce",),
    "reductions": ("reduce",),
    "reducing": ("reduce",),
    "reduced": ("reduce",),
    "amax": ("max", "reduce"),
    "amin": ("min", "reduce"),
    "argmax": ("max", "reduce", "index"),
    "argmin": ("min", "reduce", "index"),
    "logsumexp": ("log", "sum", "exp", "reduce"),
    "pooling": ("pool",),
    "maxpool": ("pool", "max"),
    "avgpool": ("pool", "avg"),
    "pools": ("pool",),
    "attention": ("attn",),
    "attn": ("attention",),
    "sdpa": ("attention", "softmax"),
    "multiheadattention": ("attention", "attn"),
    "flash": ("attention",),
    "cumsum": ("scan", "prefix"),
    "cumprod": ("scan", "prefix"),
    "cummax": ("scan", "prefix"),
    "cumulative": ("scan", "prefix"),
    "prefix": ("scan",),
    "tiling": ("tile",),
    "tiled": ("tile",),
    "tiles": ("tile",),
    "blocking": ("block", "tile"),
    "unrolling": ("unroll",),
    "unrolled": ("unroll",),
    "fused": ("fuse",),
    "fusion": ("fuse",),
    "fusing": ("fuse",),
    "vectorized": ("vectorize",),
    "vectorization": ("vectorize",),
    "coalesced": ("coalesce",),
    "coalescing": ("coalesce",),
    "lstm": ("rnn", "recurrent"),
    "gru": ("rnn", "recurrent"),
    "rnn": ("recurrent",),
    "recurrent": ("rnn",),
    "transposed": ("transpose",),
    "transposes": ("transpose",),
    "transposing": ("transpose",),
    "crossentropy": ("cross", "entropy", "loss"),
    "nll": ("loss",),
    "kldiv": ("kl", "divergence", "loss"),
    "mse": ("loss", "squared"),
    "loss": ("reduce",),
    "hinge": ("loss",),
    "huber": ("loss",),
    "triplet": ("loss",),
    "cosine": ("similarity",),
    "scaled": ("scale",),
    "scaling": ("scale",),
    "multiply": ("mul",),
    "multiplication": ("mul",),
}

# Pointwise ops: a task built from them is an elementwise (memory-bound) job, which skills say in words.
ELEMENTWISE = frozenset(
    """
relu relu6 gelu silu swish sigmoid tanh elu selu celu leaky leakyrelu hardtanh hardswish hardsigmoid mish
softplus softsign logsigmoid prelu rrelu exp log abs sqrt rsqrt clamp clip minimum maximum where sign
erf neg reciprocal pow square add sub mul div subtract divide dropout threshold
""".split()
)


@lru_cache(maxsize=65536)
def _word_tokens(word: str) -> tuple[str, ...]:
    parts = [p.lower() for p in _PART.findall(word)]
    whole = word.lower()
    tokens = [whole] if len(whole) > 1 else []
    dims = _DIM_SUFFIX.match(whole)
    if dims:  # "batchnorm2d" also as "batchnorm", so it meets its aliases
        tokens.append(dims[1])
    if len(parts) > 1:
        # Two-letter fragments of acronyms ("ReLU" -> Re, LU) are noise; "2d"-style suffixes are not.
        tokens.extend(p for p in parts if len(p) > 2 or (p[0].isdigit() and len(p) > 1))
    out: list[str] = []
    for token in tokens:
        token = _stem(token)
        if token in STOPWORDS or token.isdigit():
            continue
        out.append(token)
        out.extend(ALIASES.get(token, ()))
        if token in ELEMENTWISE:
            out.append("elementwise")
    # Once per word: "ConvTranspose3d" is one mention of a convolution, not three.
    return tuple(dict.fromkeys(out))


_IRREGULAR = {"matrices": "matrix", "indices": "index", "vertices": "vertex", "axes": "axis"}


def _stem(token: str) -> str:
    """Plural stripping only: enough for 'loads'/'load', 'kernels'/'kernel' without mangling code names."""
    if token in _IRREGULAR:
        return _IRREGULAR[token]
    if len(token) > 4 and token.endswith("ies"):
        return token[:-3] + "y"
    if len(token) > 3 and token.endswith("s") and not token.endswith(("ss", "us", "is", "as", "os")):
        return token[:-1]
    return token


def tokenize(text: str) -> list[str]:
    """Lower-case tokens of code or prose, identifiers split, stopwords dropped, aliases added."""
    tokens: list[str] = []
    # Underscores and dots separate words inside identifiers; _WORD already splits on them.
    for word in _WORD.findall(text):
        tokens.extend(_word_tokens(word))
    return tokens
