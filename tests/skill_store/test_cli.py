"""`kernelgym skills` through typer's CliRunner: happy paths, and one-line errors with exit code 1."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kernelgym
from kernelgym.skill_store.cli import app

runner = CliRunner()
SOLUTIONS = Path(kernelgym.__file__).parent / "solutions" / "cpp"
HONEST = SOLUTIONS / "level1" / "1_ReLU.py"
FUSED_CONV = SOLUTIONS / "level2" / "6_Conv2d_MaxPool_HardSwish.py"  # ~2.5x: clear of the noise


def invoke(db, *args):
    return runner.invoke(app, ["--db", str(db), *args])


def assert_clean_error(result, needle):
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    output = result.stderr if result.stderr else result.output
    assert "Traceback" not in result.output
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], output


def test_list_show_search(db_path):
    result = invoke(db_path, "list", "--backend", "triton")
    assert result.exit_code == 0 and "triton-tl-dot-matmul" in result.output and "skills in" in result.output
    result = invoke(db_path, "show", "online-softmax")
    assert result.exit_code == 0 and "running maximum" in result.output
    result = invoke(db_path, "show", "online-softmax", "--json")
    assert json.loads(result.output)["id"] == "online-softmax"
    result = invoke(db_path, "search", "warp shuffle reduction for row sums", "--backend", "cuda", "--k", "3")
    assert result.exit_code == 0 and "cuda-warp-shuffle-reduction" in result.output
    result = invoke(db_path, "search", "L2/1_Gemm_BiasAdd_ReLU", "--backend", "cpp")
    assert result.exit_code == 0 and "epilogue-fusion" in result.output


def test_export_import_round_trip(tmp_path):
    out = tmp_path / "lib.jsonl"
    result = invoke(tmp_path / "a.sqlite", "export", "--out", str(out))
    assert result.exit_code == 0 and out.exists()
    stdout_export = invoke(tmp_path / "a.sqlite", "export").output
    assert stdout_export == out.read_text()
    result = invoke(tmp_path / "b.sqlite", "import", str(out))
    assert result.exit_code == 0 and "0 added" in result.output  # b was seeded with the same skills
    assert "unchanged" in result.output


@pytest.mark.parametrize(
    "args, needle",
    [
        (["show", "no-such-skill"], "no skill with id"),
        (["import", "/nonexistent/lib.jsonl"], "no such file"),
        (["add", "/nonexistent/candidate.json"], "no such file"),
        (["verify", "no-such-skill"], "no skill with id"),
        (["list", "--status", "maybe"], "--status must be"),
        (["search", "anything", "--backend", "rocm"], "--backend must be"),
        (["search", "L3/404_Nothing"], "L3/404_Nothing"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(db_path, args, needle):
    assert_clean_error(invoke(db_path, *args), needle)


def test_bad_json_files(tmp_path, db_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x1", "title": "t", "technique": "x", "applies_when": {}}\n{broken\n')
    assert_clean_error(invoke(db_path, "import", str(bad)), "bad.jsonl:2: bad JSON")
    bad_candidate = tmp_path / "cand.json"
    bad_candidate.write_text("{not json")
    assert_clean_error(invoke(db_path, "add", str(bad_candidate)), "bad JSON")
    no_tasks = tmp_path / "cand2.json"
    no_tasks.write_text(
        json.dumps(
            {"id": "cpp-z", "title": "t", "technique": "x", "applies_when": {}, "solution_path": str(HONEST)}
        )
    )
    assert_clean_error(invoke(db_path, "add", str(no_tasks)), "task_ids")
    not_db = tmp_path / "not.sqlite"
    not_db.write_bytes(b"garbage" * 200)
    assert_clean_error(invoke(not_db, "list"), "cannot open skill store")


def test_verify_all_skips_skills_without_a_solution(db_path):
    result = invoke(db_path, "verify")
    assert result.exit_code == 0, result.output
    assert "0/0 re-verified skills passed" in result.output and "without a solution skipped" in result.output


@pytest.mark.slow
def test_add_runs_the_gate_then_verify(tmp_path, db_path):
    cand = tmp_path / "cand.json"
    cand.write_text(
        json.dumps(
            {
                "skill": {
                    "id": "cpp-conv-cli",
                    "title": "Direct conv with fused max-pool and HardSwish",
                    "technique": "Direct convolution loops; the pool and HardSwish applied before the store.",
                    "applies_when": {
                        "patterns": ["conv2d maxpool hardswish"],
                        "bound": "compute",
                        "backends": ["cpp"],
                    },
                },
                "solution_path": str(FUSED_CONV),
                "task_ids": ["bundled/L2/6_Conv2d_MaxPool_HardSwish"],
                "size": "cpu",
            }
        )
    )
    result = invoke(db_path, "add", str(cand), "--runs", "2")  # the default threshold, 1.0
    assert result.exit_code == 0, result.output
    assert "admitted cpp-conv-cli" in result.output and "1/1 admitted" in result.output
    result = invoke(db_path, "verify", "cpp-conv-cli", "--runs", "1")
    assert result.exit_code == 0 and "1/1 re-verified skills passed" in result.output
    result = invoke(db_path, "show", "cpp-conv-cli")
    assert "evidence" in result.output and "verification history" in result.output
