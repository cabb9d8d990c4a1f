import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Gated (SwiGLU) feed-forward block of modern transformers: down(SiLU(gate(x)) * up(x)), no biases."""

    def __init__(self, embed_dim: int, hidden_dim: int):
        super().__init__()
        self.gate = nn.Linear(embed_dim, hidden_dim, bias=False)
        self.up = nn.Linear(embed_dim, hidden_dim, bias=False)
        self.down = nn.Linear(hidden_dim, embed_dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


batch_size = 4
seq_len = 1024
embed_dim = 2048
hidden_dim = 5632


def get_inputs():
    return [torch.randn(batch_size, seq_len, embed_dim)]


def get_init_inputs():
    return [embed_dim, hidden_dim]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "mlp",
    "sizes": {"cpu": {"batch_size": 2, "seq_len": 128, "embed_dim": 256, "hidden_dim": 704}},
    "shapes": {"cpu": {"batch_size": [1, 2]}, "gpu": {"batch_size": [1, 4]}},
}
