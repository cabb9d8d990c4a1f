"""A folder of the user's own tasks end to end: `kernelgym bench --suite DIR` with the one_shot and davinci
baselines, `kernelgym view` of that run, `kernelgym train rl` with a held-out folder, and a folder with unfit
tasks benched without them. The folders under tests/data were written for these tests (new small ops)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelgym.cli import app

DATA = Path(__file__).resolve().parents[1] / "data"
OWN = DATA / "own_tasks"
FLAWED = DATA / "own_tasks_flawed"
FAST_JUDGE = ["--eval-option", "timing_budget_s=1.0", "--eval-option", "timing_trials=10"]


def _bench(out: Path, *args: str) -> list[dict]:
    result = CliRunner().invoke(app, ["bench", "--out", str(out), "--no-tensorboard", *FAST_JUDGE, *args])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_bench_one_shot_on_a_folder_then_view(tmp_path):
    out = tmp_path / "one_shot"
    records = _bench(out, "--suite", str(OWN), "--baseline", "one_shot", "--tasks", "all",
                     "--policy", f"replay:{DATA / 'own_solutions'}")
    by_id = {r["task_id"]: r for r in records}
    assert set(by_id) == {"own_tasks/L1/1_ClampScale", "own_tasks/L1/2_RowCenter",
                          "own_tasks/L2/1_ScaleThenRowSquareSum"}
    assert by_id["own_tasks/L1/1_ClampScale"]["turns"][0]["verdict"] == "ok"  # judged on the folder's task
    assert by_id["own_tasks/L1/2_RowCenter"]["turns"][0]["verdict"] == "done"  # no replay file for it
    run = json.loads((out / "run.json").read_text())
    assert run["suite"] == str(OWN) and run["env_ids"] == ["KernelGym-L1-v0", "KernelGym-L2-v0"]
    view = CliRunner().invoke(app, ["view", str(out)])
    assert view.exit_code == 0, view.output
    page = (out / "view.html").read_text()
    assert "own_tasks/L1/1_ClampScale" in page and "clamp_scale" in page  # the task and its best kernel


@pytest.mark.slow
def test_bench_davinci_on_a_folder_selects_skills_for_its_tasks(tmp_path, tiny_model_dir):
    out = tmp_path / "davinci"
    records = _bench(out, "--suite", str(OWN), "--baseline", "davinci", "--tasks", "L1/2_*", "--turns", "1",
                     "--policy", f"hf:{tiny_model_dir}?max_new_tokens=8",
                     "-o", f"skills_db={tmp_path / 'skills.sqlite'}")
    assert not (out / "errors.jsonl").exists()  # the skill lookup found the folder's task
    [record] = records
    assert record["task_id"] == "own_tasks/L1/2_RowCenter"
    assert record["turns"][0]["notes"].startswith("skills: ")


@pytest.mark.slow
def test_bench_leaves_out_the_unfit_tasks_of_a_folder(tmp_path):
    out = tmp_path / "flawed"
    records = _bench(out, "--suite", str(FLAWED), "--policy", "scripted:DONE", "--tasks", "all")
    assert [r["task_id"] for r in records] == ["own_tasks_flawed/L1/1_CubeMinusInput"]
    left_out = {Path(e["id"]).name: e["reason"] for e in json.loads((out / "run.json").read_text())
                ["tasks_left_out"]}
    assert set(left_out) == {"2_NoInputs.py", "3_ReferenceRaises", "4_ConstantOutput"}
    assert "reference raises" in left_out["3_ReferenceRaises"]


@pytest.mark.slow
def test_train_rl_evaluates_a_held_out_folder(tmp_path, tiny_model_dir):
    out = tmp_path / "rl"
    common = [f"backbone.model={tiny_model_dir}", "backbone.max_prompt_tokens=768", "backbone.threads=1",
              f"episode.suite={OWN}", 'episode.task_ids=["L1/1_ClampScale"]', "episode.max_turns=1",
              "episode.selection_tokens=8", "episode.policy_tokens=8", "episode.summary_tokens=8",
              'episode.eval_options={"timing_budget_s": 1.0}', "steps=1", "tasks_per_step=1", "group_size=2",
              "save_every=1", f"output_dir={out}"]
    result = CliRunner().invoke(app, ["train", "rl", *common, f"heldout_suite={OWN / 'level2'}"])
    assert result.exit_code == 0, result.output
    assert "held-out correct_rate" in result.output
    [line] = [json.loads(x) for x in (out / "heldout.jsonl").read_text().splitlines()]
    assert line["step"] == 1 and list(line["tasks"]) == ["own_tasks/L2/1_ScaleThenRowSquareSum"]
    trained = {json.loads(x)["task_id"] for x in (out / "trajectories.jsonl").read_text().splitlines()}
    assert trained == {"own_tasks/L1/1_ClampScale"}
    clash = CliRunner().invoke(app, ["train", "rl", *common, f"output_dir={tmp_path / 'rl2'}",
                                     f"heldout_suite={OWN}"])
    assert clash.exit_code == 1 and "shares tasks with the training set" in clash.output
