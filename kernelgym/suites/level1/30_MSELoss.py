import torch
import torch.nn as nn


class Model(nn.Module):
    """Mean squared error between predictions and targets, averaged over every element (a scalar)."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.mean((predictions - targets) ** 2)


batch_size = 8192
dim = 12288


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "loss",
    "sizes": {"cpu": {"batch_size": 128, "dim": 2048}},
    "shapes": {"cpu": {"batch_size": [32, 128]}, "gpu": {"batch_size": [2048, 8192]}},
}
