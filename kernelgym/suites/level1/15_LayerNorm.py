import torch
import torch.nn as nn


class Model(nn.Module):
    """Layer normalization over the hidden (last) dimension of a (batch, seq_len, hidden) tensor."""

    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


batch_size = 16
seq_len = 4096
hidden = 1536


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [hidden]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "norm",
    "sizes": {"cpu": {"batch_size": 2, "seq_len": 128, "hidden": 1024}},
    "shapes": {"cpu": {"batch_size": [1, 2]}, "gpu": {"batch_size": [4, 16]}},
}
