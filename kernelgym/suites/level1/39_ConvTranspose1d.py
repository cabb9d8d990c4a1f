import torch
import torch.nn as nn


class Model(nn.Module):
    """Transposed 1D convolution, stride 2 with output padding: the output is exactly twice as long."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.deconv = nn.ConvTranspose1d(
            in_channels, out_channels, kernel_size, stride=2, padding=kernel_size // 2, output_padding=1
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.deconv(x)


batch_size = 64
in_channels = 128
out_channels = 64
length = 8192
kernel_size = 5


def get_inputs():
    return [torch.randn(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "convolution",
    "sizes": {"cpu": {"batch_size": 4, "in_channels": 16, "out_channels": 8, "length": 512}},
    "shapes": {"cpu": {"batch_size": [1, 4]}, "gpu": {"batch_size": [16, 64]}},
}
