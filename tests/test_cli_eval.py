"""`kernelgym eval`: judges files in order, one JSON line each; bad input is one clean line."""

import json

from typer.testing import CliRunner

from kernelgym.cli import app
from kernelgym.solutions import examples


def test_eval_json_with_the_ncu_option_on_a_cpu_machine(tmp_path):
    example = next(e for e in examples("cpp") if e.task_id.endswith("L1/1_ReLU"))
    result = CliRunner().invoke(app, ["eval", "--task", "L1/1_ReLU", "--json", "--ncu", str(example.path)])
    assert result.exit_code == 0, result.output
    row = json.loads(next(line for line in result.stdout.splitlines() if line.startswith("{")))
    assert row["verdict"] == "ok"
    assert "ran on the CPU" in row["feedback"]  # asked for, not possible here: said, not failed


def test_eval_of_a_missing_file_is_one_clean_error(tmp_path):
    result = CliRunner().invoke(app, ["eval", "--task", "L1/1_ReLU", str(tmp_path / "nope.py")])
    assert result.exit_code != 0
    assert "cannot read" in result.output and "Traceback" not in result.output
