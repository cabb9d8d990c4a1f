import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Embedding head: linear layer, L2 normalization of each row, then a constant scale."""

    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.linear(x), p=2.0, dim=1) * self.scale


batch_size = 2048
in_features = 8192
out_features = 2048
scale = 16.0


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "gemm_chain",
    "sizes": {"cpu": {"batch_size": 128, "in_features": 1024, "out_features": 256}},
    "shapes": {"cpu": {"batch_size": [32, 128]}, "gpu": {"batch_size": [512, 2048]}},
}
