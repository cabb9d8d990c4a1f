"""Category of a KernelBench problem guessed from its name (bundled tasks declare theirs)."""

from __future__ import annotations

# Checked in order: the first keyword found in the lower-cased name decides.
_KEYWORDS: list[tuple[str, tuple[str, ...]]] = [
    ("attention", ("attention", "attn", "transformer", "vit", "swin")),
    ("convolution", ("conv",)),
    ("matmul", ("matmul", "gemm", "matrix", "bmm", "linear", "mlp", "dense")),
    ("norm", ("norm",)),
    ("pooling", ("pool",)),
    ("loss", ("loss", "entropy", "divergence", "hinge")),
    ("scan", ("cumsum", "cumprod", "scan", "cumulative")),
    ("reduction", ("sum", "mean", "max", "min", "argmax", "argmin", "reduction", "prod")),
    ("rnn", ("lstm", "gru", "rnn")),
    ("activation", ("relu", "gelu", "sigmoid", "tanh", "softmax", "swish", "selu", "elu", "softplus",
                    "softsign", "hardtanh", "mish", "silu", "hardsigmoid")),
]


def guess_category(name: str, level: int) -> str:
    lowered = name.lower()
    for category, words in _KEYWORDS:
        if any(w in lowered for w in words):
            return category if level != 3 or category in ("attention", "rnn") else "architecture"
    return "architecture" if level == 3 else "other"
