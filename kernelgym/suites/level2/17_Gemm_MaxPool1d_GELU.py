import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear layer, max over non-overlapping windows of pool_size adjacent features, then GELU."""

    def __init__(self, in_features: int, out_features: int, pool_size: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.pool_size = pool_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear(x).unsqueeze(1)
        x = F.max_pool1d(x, self.pool_size).squeeze(1)
        return F.gelu(x)


batch_size = 1024
in_features = 4096
out_features = 8192
pool_size = 4


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, pool_size]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "gemm_chain",
    "sizes": {"cpu": {"batch_size": 128, "in_features": 512, "out_features": 512}},
    "shapes": {"cpu": {"batch_size": [32, 128]}, "gpu": {"batch_size": [256, 1024]}},
}
