import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear layer y, then y + scale * y * sigmoid(y): a scaled swish branch added back onto its input."""

    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        return y + self.scale * (y * torch.sigmoid(y))


batch_size = 8192
in_features = 2048
out_features = 2048
scale = 2.0


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "gemm_chain",
    "sizes": {"cpu": {"batch_size": 256, "in_features": 256, "out_features": 256}},
    "shapes": {"cpu": {"batch_size": [64, 256]}, "gpu": {"batch_size": [2048, 8192]}},
}
