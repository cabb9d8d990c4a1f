"""`kernelgym eval --suite ... DIR`: a folder of generations in KernelBench's layouts, judged for real."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kernelgym
from kernelgym.cli import app
from kernelgym.folder_eval import summarize_rows
from kernelgym.tasks import from_path
from kernelgym.tasks.generations import find_generations, missing_tasks

PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.{op}(x)


batch_size = 16
dim = 256


def get_inputs():
    return [torch.rand(batch_size, dim) * 2 - 1]


def get_init_inputs():
    return []
"""

RELU = (Path(kernelgym.__file__).parent / "solutions" / "cpp" / "level1" / "1_ReLU.py").read_text()
PASSTHROUGH = ("import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
               "    def forward(self, x):\n        return torch.relu(x)\n")


@pytest.fixture
def suite(tmp_path):
    level1 = tmp_path / "problems" / "level1"
    level1.mkdir(parents=True)
    (level1 / "1_Relu.py").write_text(PROBLEM.format(op="relu"))
    (level1 / "2_Tanh.py").write_text(PROBLEM.format(op="tanh"))
    return tmp_path / "problems"


def test_both_layouts_are_matched_to_their_tasks(suite, tmp_path):
    tasks = list(from_path(suite))
    run = tmp_path / "run"
    (run / "level1").mkdir(parents=True)
    for name in (
        "level_1_problem_1_sample_0_kernel.py",
        "level_1_problem_1_sample_3_kernel.py",
        "level_1_problem_7_sample_0_kernel.py",
        "level_1_problem_1_sample_0_prompt.py",
        "notes.py",
    ):
        (run / name).write_text("x = 1\n")
    (run / "level1" / "2_Tanh.py").write_text("x = 1\n")
    found = {g.path.name: g for g in find_generations(run, tasks)}
    assert set(found) == {
        "level_1_problem_1_sample_0_kernel.py",
        "level_1_problem_1_sample_3_kernel.py",
        "level_1_problem_7_sample_0_kernel.py",
        "notes.py",
        "2_Tanh.py",
    }
    assert found["level_1_problem_1_sample_3_kernel.py"].task.id == "problems/L1/1_Relu"
    assert found["level_1_problem_1_sample_3_kernel.py"].sample == 3
    assert found["2_Tanh.py"].task.id == "problems/L1/2_Tanh" and found["2_Tanh.py"].sample == 0
    assert found["level_1_problem_7_sample_0_kernel.py"].task is None
    assert "problem number 7" in found["level_1_problem_7_sample_0_kernel.py"].problem
    assert found["notes.py"].task is None and "not a KernelBench generation name" in found["notes.py"].problem
    assert missing_tasks(list(found.values()), tasks) == []
    assert [t.id for t in missing_tasks([found["2_Tanh.py"]], tasks)] == ["problems/L1/1_Relu"]


def test_summary_counts_missing_tasks_as_not_correct():
    rows = [
        {"verdict": "ok", "correct": True, "speedup": 2.5, "verified_speedup": 2.5},
        {"verdict": "ok", "correct": True, "speedup": 0.5, "verified_speedup": None},
        {"verdict": "hack", "correct": False, "speedup": None},
        {"verdict": None, "correct": False},
    ]
    s = summarize_rows(rows, missing=["problems/L1/9_X"])
    assert s["expected"] == 5 and s["correct"] == 2 and s["verdicts"] == {"ok": 2, "hack": 1, "not_judged": 1}
    assert s["fast_p"] == {"0": 0.4, "1": 0.2, "1.5": 0.2, "2": 0.2} and s["fast_1_verified"] == 0.2
    assert s["geomean_speedup"] == pytest.approx((2.5 * 0.5) ** 0.5)


@pytest.mark.slow
def test_eval_a_folder_of_generations(suite, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "level_1_problem_1_sample_0_kernel.py").write_text(RELU)
    (run / "level_1_problem_1_sample_1_kernel.py").write_text(PASSTHROUGH)  # no kernel of its own
    (run / "level_1_problem_5_sample_0_kernel.py").write_text(RELU)  # no such problem
    out = tmp_path / "results.jsonl"
    result = CliRunner().invoke(
        app, ["eval", "--suite", str(suite), "--level", "1", "--json", "--out", str(out), str(run)]
    )
    assert result.exit_code == 1, result.output  # not every solution is ok
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    rows, [summary] = lines[:-1], lines[-1:]
    by_name = {Path(r["solution"]).name: r for r in rows}
    assert by_name["level_1_problem_1_sample_0_kernel.py"]["verdict"] == "ok"
    assert by_name["level_1_problem_1_sample_0_kernel.py"]["task_id"] == "problems/L1/1_Relu"
    assert by_name["level_1_problem_1_sample_1_kernel.py"]["verdict"] in ("hack", "compile_error")
    assert by_name["level_1_problem_5_sample_0_kernel.py"]["verdict"] is None
    assert summary["missing"] == ["problems/L1/2_Tanh"]  # no file answers task 2: counted as not correct
    s = summary["summary"]
    assert s["solutions"] == 3 and s["expected"] == 4 and s["correct"] == 1 and s["fast_p"]["0"] == 0.25
    assert len(out.read_text().splitlines()) == 3
    assert "fast_1" in result.stderr and "missing tasks" in result.stderr  # the table, beside the JSON lines


def test_exit_zero_turns_the_failure_exit_off(suite, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "level_1_problem_5_sample_0_kernel.py").write_text(RELU)  # not judged (no such problem): not ok
    assert CliRunner().invoke(app, ["eval", "--suite", str(suite), str(run)]).exit_code == 1
    again = CliRunner().invoke(app, ["eval", "--suite", str(suite), "--exit-zero", str(run)])
    assert again.exit_code == 0 and "not judged" in again.stdout and "missing tasks" in again.stdout


def test_files_without_a_task_or_folders_with_one_are_clean_errors(tmp_path):
    result = CliRunner().invoke(app, ["eval", str(tmp_path / "a.py")])
    assert result.exit_code == 1 and "is not a folder" in result.output and "Traceback" not in result.output
    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(app, ["eval", str(empty)])
    assert result.exit_code == 1 and "holds no solution files" in result.output
