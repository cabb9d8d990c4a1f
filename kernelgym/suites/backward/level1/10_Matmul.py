import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B. Forward and backward are judged: the gradients of A and B for an upstream gradient."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


M = 1024
K = 1024
N = 1024


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []


# kernelgym metadata (read without running the file): the cpu size replaces the constants above; held-out
# shapes are drawn within the limits of "shapes".
# Gradients are sums over a whole dimension of perturbed (rescaled and shifted) inputs: values of a hundred or
# more, and those that cancel to near zero carry fp32 rounding of about 1e-4 in any summation order (an honest
# IEEE-fp32 Triton kernel on the H200 missed 1e-4 on 2-6 of a million). rtol stays 1e-4, which a TF32 product fails.
KERNELGYM = {
    "atol": 1e-3,
    "category": "gemm",
    "backward": True,
    "sizes": {"cpu": {"M": 128, "K": 128, "N": 128}},
    "shapes": {"cpu": {"M": [16, 256], "K": [16, 256], "N": [16, 256]},
               "gpu": {"M": [256, 2048], "K": [256, 2048], "N": [256, 2048]}},
}
