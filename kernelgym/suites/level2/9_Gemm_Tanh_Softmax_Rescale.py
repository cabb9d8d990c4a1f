import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear layer, tanh, softmax over the features, rescaled by the feature count (so the mean is 1)."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(self.linear(x))
        return torch.softmax(x, dim=1) * x.shape[1]


batch_size = 1024
in_features = 4096
out_features = 8192


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "gemm_chain",
    "sizes": {"cpu": {"batch_size": 128, "in_features": 512, "out_features": 256}},
    "shapes": {"cpu": {"batch_size": [32, 128]}, "gpu": {"batch_size": [256, 1024]}},
}
