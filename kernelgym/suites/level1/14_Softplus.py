import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Elementwise softplus log(1 + exp(beta * x)) / beta, linear once beta * x exceeds the threshold."""

    def __init__(self, beta: float, threshold: float):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.softplus(x, beta=self.beta, threshold=self.threshold)


batch_size = 8192
dim = 12288
beta = 2.0
threshold = 10.0


def get_inputs():
    # Spread so that some values pass the linear threshold (beta * x > threshold) and many are far negative.
    return [torch.randn(batch_size, dim) * 3]


def get_init_inputs():
    return [beta, threshold]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "activation",
    "sizes": {"cpu": {"batch_size": 128, "dim": 2048}},
    "shapes": {"cpu": {"batch_size": [32, 128]}, "gpu": {"batch_size": [2048, 8192]}},
}
