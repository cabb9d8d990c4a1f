import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """One very wide hidden layer: Linear expands 16x, GELU, Linear projects back down."""

    def __init__(self, in_features: int, hidden_features: int, out_features: int):
        super().__init__()
        self.expand = nn.Linear(in_features, hidden_features)
        self.project = nn.Linear(hidden_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.project(F.gelu(self.expand(x)))


batch_size = 4096
in_features = 1024
hidden_features = 16384
out_features = 1024


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, hidden_features, out_features]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "mlp",
    "sizes": {"cpu": {"batch_size": 64, "in_features": 256, "hidden_features": 4096, "out_features": 256}},
    "shapes": {"cpu": {"batch_size": [16, 64]}, "gpu": {"batch_size": [1024, 4096]}},
}
