import torch
import torch.nn as nn


class Model(nn.Module):
    """Log-softmax over dimension 1 of a (batch, dim) tensor: x - max - log(sum(exp(x - max)))."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=self.dim)


batch_size = 8192
dim = 12288


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [1]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "activation",
    "sizes": {"cpu": {"batch_size": 64, "dim": 4096}},
    "shapes": {"cpu": {"batch_size": [16, 64]}, "gpu": {"batch_size": [2048, 8192]}},
}
