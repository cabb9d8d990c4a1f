import torch
import torch.nn as nn


class Model(nn.Module):
    """Elementwise tanh. Forward and backward are judged: the gradient of x for an upstream gradient."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x)


batch_size = 4096
dim = 8192


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


# kernelgym metadata (read without running the file): the cpu size replaces the constants above; held-out
# shapes are drawn within the limits of "shapes".
KERNELGYM = {
    "category": "activation",
    "backward": True,
    "sizes": {"cpu": {"batch_size": 64, "dim": 2048}},
    "shapes": {"cpu": {"batch_size": [8, 128], "dim": [100, 4096]},
               "gpu": {"batch_size": [512, 8192], "dim": [1000, 16384]}},
}
