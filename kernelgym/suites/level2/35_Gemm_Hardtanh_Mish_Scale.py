import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear layer, hard-tanh clipping to [-1, 1], Mish, then a constant scale."""

    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.hardtanh(self.linear(x), -1.0, 1.0)
        return F.mish(x) * self.scale


batch_size = 1024
in_features = 4096
out_features = 8192
scale = 2.0


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "gemm_chain",
    "sizes": {"cpu": {"batch_size": 64, "in_features": 512, "out_features": 512}},
    "shapes": {"cpu": {"batch_size": [16, 64]}, "gpu": {"batch_size": [256, 1024]}},
}
