import torch
import torch.nn as nn


class Model(nn.Module):
    """Elementwise ReLU."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 4096
dim = 16384


def get_inputs():
    # Shifted so that about half the values are negative: relu must really do something.
    return [torch.rand(batch_size, dim) * 2 - 1]


def get_init_inputs():
    return []


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "activation",
    "sizes": {"cpu": {"batch_size": 128, "dim": 4096}},
    "shapes": {"cpu": {"batch_size": [16, 256], "dim": [1000, 8192]},
               "gpu": {"batch_size": [1024, 8192], "dim": [4000, 32768]}},
}
