import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear layer, tanh, the mean over the features of each row, then a constant scale."""

    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.linear(x)).mean(dim=1, keepdim=True) * self.scale


batch_size = 1024
in_features = 8192
out_features = 4096
scale = 10.0


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "gemm_chain",
    "sizes": {"cpu": {"batch_size": 128, "in_features": 512, "out_features": 512}},
    "shapes": {"cpu": {"batch_size": [32, 128]}, "gpu": {"batch_size": [256, 1024]}},
}
