import torch
import torch.nn as nn


class Model(nn.Module):
    """Gated linear unit: one linear layer makes value and gate halves; the output is value * sigmoid(gate)."""

    def __init__(self, in_features: int, hidden_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, 2 * hidden_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        value, gate = self.linear(x).chunk(2, dim=1)
        return value * torch.sigmoid(gate)


batch_size = 1024
in_features = 4096
hidden_features = 4096


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, hidden_features]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "gemm_chain",
    "sizes": {"cpu": {"batch_size": 128, "in_features": 512, "hidden_features": 256}},
    "shapes": {"cpu": {"batch_size": [32, 128]}, "gpu": {"batch_size": [256, 1024]}},
}
