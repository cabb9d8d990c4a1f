import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Elementwise ELU: x where x > 0, alpha * (exp(x) - 1) elsewhere."""

    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.elu(x, alpha=self.alpha)


batch_size = 8192
dim = 12288
alpha = 1.5


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [alpha]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "activation",
    "sizes": {"cpu": {"batch_size": 128, "dim": 2048}},
    "shapes": {"cpu": {"batch_size": [32, 128]}, "gpu": {"batch_size": [2048, 8192]}},
}
