import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Transformer-style MLP: expand with a linear layer, GELU, project back with a second linear layer."""

    def __init__(self, features: int, hidden_features: int):
        super().__init__()
        self.fc1 = nn.Linear(features, hidden_features)
        self.fc2 = nn.Linear(hidden_features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


batch_size = 1024
features = 2048
hidden_features = 8192


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features, hidden_features]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "gemm_chain",
    "sizes": {"cpu": {"batch_size": 64, "features": 256, "hidden_features": 1024}},
    "shapes": {"cpu": {"batch_size": [16, 64]}, "gpu": {"batch_size": [256, 1024]}},
}
