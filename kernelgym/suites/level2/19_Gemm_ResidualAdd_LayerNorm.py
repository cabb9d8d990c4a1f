import torch
import torch.nn as nn


class Model(nn.Module):
    """Square linear layer with a residual connection, then layer normalization (a post-norm block)."""

    def __init__(self, features: int):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.norm = nn.LayerNorm(features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.linear(x) + x)


batch_size = 2048
features = 4096


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "gemm_chain",
    "sizes": {"cpu": {"batch_size": 128, "features": 512}},
    "shapes": {"cpu": {"batch_size": [32, 128]}, "gpu": {"batch_size": [512, 2048]}},
}
