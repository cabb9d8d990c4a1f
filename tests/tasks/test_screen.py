"""The degenerate-task screen flags planted degenerate tasks and passes healthy ones."""

import pytest

from kernelgym.tasks import task_from_source
from kernelgym.tasks.screen import screen_task

TEMPLATE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return {body}

def get_inputs():
    return [torch.rand(8, 16), torch.rand(8, 16)]

def get_init_inputs():
    return []
'''

CASES = {
    "healthy": ("torch.relu(x - 0.5) + y", None),
    "constant": ("torch.ones_like(x) * 3.0", "constant_output"),
    "ignores_y": ("torch.tanh(x) + 0 * y.sum()", "ignores_input"),
    "nan": ("torch.log(x - 2.0) + y", "non_finite"),
    "tiny": ("(x + y) * 1e-7", "zeros_pass"),
    "mean_minus_mean": ("(x - x.mean()).mean() + (y - y.mean()).mean() * 0 + x[:, :1] * 0",
                        "constant_output"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_planted_tasks(name):
    body, flag = CASES[name]
    task = task_from_source(TEMPLATE.format(body=body), suite="user", level=2, file_name=f"1_{name}.py")
    result = screen_task(task)
    if flag is None:
        assert result.passed, result.flags
    else:
        assert any(f.startswith(flag) for f in result.flags), result.flags
