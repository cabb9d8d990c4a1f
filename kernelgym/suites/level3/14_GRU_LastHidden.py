import torch
import torch.nn as nn


class Model(nn.Module):
    """Three-layer GRU over a batch-first sequence; returns every layer's final hidden state."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int):
        super().__init__()
        self.gru = nn.GRU(input_size, hidden_size, num_layers=num_layers, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, h_n = self.gru(x)
        return h_n  # (num_layers, batch, hidden_size)


batch_size = 64
seq_len = 512
input_size = 256
hidden_size = 512
num_layers = 3


def get_inputs():
    return [torch.randn(batch_size, seq_len, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, num_layers]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "rnn",
    "sizes": {"cpu": {"batch_size": 16, "seq_len": 32, "input_size": 64, "hidden_size": 128}},
    "shapes": {"cpu": {"batch_size": [4, 16]}, "gpu": {"batch_size": [16, 64]}},
}
