import torch
from torch import nn


class Model(nn.Module):
    """Doubles its input; the file forgot get_inputs."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def get_init_inputs():
    return []
