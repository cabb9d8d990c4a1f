"""`kernelgym examples`: a suite's example solutions through the real judge."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kernelgym.cli import app


def test_the_curriculum_suites_honest_solutions_are_judged_ok():
    picked = ["curriculum/L1/1_Neg", "curriculum/L2/15_RowSoftmax"]
    args = ["examples", "--suite", "curriculum", "--size", "cpu", "--json"]
    asked = [picked[0], "L2/15_RowSoftmax"]  # the suite's prefix may be left out, as everywhere else
    result = CliRunner().invoke(app, args + [a for task in asked for a in ("--only", task)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.strip().splitlines()]
    assert sorted(r["task_id"] for r in rows) == picked
    assert all(r["verdict"] == "ok" for r in rows), [(r["task_id"], r["reasons"]) for r in rows]


def test_an_unknown_suite_is_one_error_line():
    result = CliRunner().invoke(app, ["examples", "--suite", "nonesuch"])
    assert result.exit_code == 1
    assert result.output.strip() == "error: unknown suite 'nonesuch': bundled, backward or curriculum"
