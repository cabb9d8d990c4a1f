import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Product of two input matrices, scaled, plus a learned bias row, then hard-swish."""

    def __init__(self, n: int, scale: float):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(n) * 0.02)
        self.scale = scale

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return F.hardswish(torch.matmul(a, b) * self.scale + self.bias)


m = 2048
k = 4096
n = 4096


def get_inputs():
    return [torch.randn(m, k), torch.randn(k, n)]


def get_init_inputs():
    # 1/sqrt(k) keeps the product of two standard-normal matrices at unit scale.
    return [n, k ** -0.5]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "gemm_chain",
    "sizes": {"cpu": {"m": 128, "k": 512, "n": 256}},
    "shapes": {"cpu": {"m": [32, 128], "k": [128, 512], "n": [64, 256]}, "gpu": {"m": [512, 2048], "k": [1024, 4096], "n": [1024, 4096]}},
}
