import torch
import torch.nn as nn


class Model(nn.Module):
    """Sequence tagger: a bidirectional LSTM, then a linear layer scoring every step's tags."""

    def __init__(self, input_size: int, hidden_size: int, num_tags: int):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hidden_size, num_tags)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features, _ = self.lstm(x)  # (batch, seq, 2 * hidden_size): forward and backward halves
        return self.head(features)


batch_size = 64
seq_len = 512
input_size = 256
hidden_size = 512
num_tags = 64


def get_inputs():
    return [torch.randn(batch_size, seq_len, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, num_tags]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "rnn",
    "sizes": {"cpu": {"batch_size": 8, "seq_len": 32, "input_size": 64, "hidden_size": 128, "num_tags": 32}},
    "shapes": {"cpu": {"batch_size": [2, 8]}, "gpu": {"batch_size": [16, 64]}},
}
