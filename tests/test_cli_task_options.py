"""`kernelgym eval --shapes/--dtype` and `kernelgym tasks list --suite backward`, through the real judge."""

from __future__ import annotations

import json
import time

from typer.testing import CliRunner

from kernelgym.cli import app

HARDCODED_RELU = '''
import torch
import torch.nn as nn
from kernelgym.kernels import load_cpp

_lib = load_cpp(r"""
#include <cstdint>
// NONCE
extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
""")

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty(128, 4096)
        _lib.relu(x.contiguous(), y, 128 * 4096)
        return y
'''


def test_tasks_list_backward_lists_the_backward_suite():
    result = CliRunner().invoke(app, ["tasks", "list", "--suite", "backward", "--json"])
    assert result.exit_code == 0
    rows = [json.loads(line) for line in result.output.strip().splitlines()]
    assert len(rows) >= 12 and all(r["backward"] and r["id"].startswith("backward/") for r in rows)
    assert {r["level"] for r in rows} == {1, 2}


def test_eval_shapes_heldout_fails_a_hardcoded_shape(tmp_path):
    path = tmp_path / "hard_relu.py"
    path.write_text(HARDCODED_RELU.replace("NONCE", str(time.time_ns())))
    shown = CliRunner().invoke(app, ["eval", str(path), "--task", "L1/1_ReLU", "--json", "--timeout", "30"])
    assert json.loads(shown.output)["verdict"] == "ok", shown.output
    result = CliRunner().invoke(app, ["eval", str(path), "--task", "L1/1_ReLU", "--shapes", "heldout",
                                      "--json"])
    row = json.loads(result.output)
    assert result.exit_code == 1 and row["verdict"] == "incorrect"
    assert row["reasons"][0].startswith("heldout_shape: held-out shape batch_size=")


def test_eval_bad_dtype_or_shapes_is_one_error_line(tmp_path):
    path = tmp_path / "s.py"
    path.write_text("x = 1\n")
    for flag, value in (("--dtype", "fp8"), ("--shapes", "hidden")):
        result = CliRunner().invoke(app, ["eval", str(path), "--task", "L1/1_ReLU", flag, value])
        assert result.exit_code == 1
        assert "error:" in result.output and value in result.output
