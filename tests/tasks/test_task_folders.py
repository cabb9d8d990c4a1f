"""A folder of the user's own task files as a task source: stable ids that resolve in a later process,
`gym.make(id, suite=DIR)`, and `kernelgym tasks check DIR` naming every unfit task and file.

The folders under tests/data were written for these tests (new small ops, not the bundled suite's)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelgym.cli import app
from kernelgym.errors import TaskNotFoundError
from kernelgym.tasks import check as task_check
from kernelgym.tasks import from_path, load_suite, resolve_task

DATA = Path(__file__).resolve().parents[1] / "data"
OWN = DATA / "own_tasks"  # level1/ and level2/ subfolders
FLAWED = DATA / "own_tasks_flawed"  # flat: one good task, a file without get_inputs, a raising reference,
# and a constant output


def test_folder_tasks_are_named_after_the_folder(tmp_path):
    assert load_suite(str(OWN)).ids() == ["own_tasks/L1/1_ClampScale", "own_tasks/L1/2_RowCenter",
                                          "own_tasks/L2/1_ScaleThenRowSquareSum"]
    # a levelN folder is named after its parent: the same ids as through the whole folder
    assert from_path(OWN / "level2").ids() == ["own_tasks/L2/1_ScaleThenRowSquareSum"]
    assert from_path(OWN / "level1" / "2_RowCenter.py")[0].id == "own_tasks/L1/2_RowCenter"
    # a file without KernelBench's number is named by its stem; a folder named like a built-in suite is not
    # taken for it
    flat = tmp_path / "bundled"
    flat.mkdir()
    shutil.copy(OWN / "level1" / "2_RowCenter.py", flat / "row_center.py")
    assert from_path(flat).ids() == ["bundled-folder/L1/row_center"]


def test_folder_ids_resolve_in_a_later_process(tmp_path):
    ops = tmp_path / "my_ops"
    shutil.copytree(OWN, ops)
    assert len(load_suite(str(ops))) == 3  # reading the folder remembers where it is
    assert resolve_task("my_ops/L2/1_ScaleThenRowSquareSum").path == str(ops / "level2" /
                                                                         "1_ScaleThenRowSquareSum.py")
    code = ("from kernelgym.tasks import resolve_task; "
            "print(resolve_task('my_ops/L1/2_RowCenter').path)")
    later = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                           env={**os.environ}, check=False)
    assert later.returncode == 0, later.stderr
    assert later.stdout.strip() == str(ops / "level1" / "2_RowCenter.py")
    # an id may also carry the folder's path
    assert resolve_task(f"{OWN}/L1/1_ClampScale").id == "own_tasks/L1/1_ClampScale"
    shutil.rmtree(ops)
    with pytest.raises(TaskNotFoundError, match="gone"):
        resolve_task("my_ops/L1/2_RowCenter")


def test_gym_make_takes_a_folder_as_its_suite():
    import gymnasium as gym

    env = gym.make("KernelGym-L2-v0", suite=str(OWN), size="cpu", backend="cpp")
    try:
        assert [t.id for t in env.unwrapped.tasks] == ["own_tasks/L2/1_ScaleThenRowSquareSum"]
        obs, info = env.reset(seed=0)
        assert info["task_id"] == "own_tasks/L2/1_ScaleThenRowSquareSum" and "weight" in obs["prompt"]
    finally:
        env.close()


def test_a_folder_leaves_out_a_bad_file_with_a_warning(tmp_path):
    flawed = shutil.copytree(FLAWED, tmp_path / "flawed")  # a path of its own: warned once per process
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ids = load_suite(str(flawed)).ids()
        assert load_suite(str(flawed)).ids() == ids
    assert "flawed/L1/1_CubeMinusInput" in ids and not any("NoInputs" in i for i in ids)
    [warning] = [str(w.message) for w in caught]
    assert warning.startswith(f"left out {flawed / '2_NoInputs.py'}: no get_inputs (a KernelBench problem")


def test_tasks_check_names_each_unfit_task_and_file():
    result = CliRunner().invoke(app, ["tasks", "check", str(FLAWED), "--json"])
    assert result.exit_code == 1, result.output
    rows = {Path(r["id"]).name: r for r in map(json.loads, result.stdout.splitlines())}
    assert rows["1_CubeMinusInput"]["ok"]
    assert "no get_inputs" in rows["2_NoInputs.py"]["reason"]
    assert rows["3_ReferenceRaises"]["reason"].startswith("reference raises at the cpu size: RuntimeError")
    assert "constant_output" in rows["4_ConstantOutput"]["reason"]
    lines = CliRunner().invoke(app, ["tasks", "check", str(OWN)]).output.splitlines()
    assert lines[-1] == "3/3 tasks ok" and all(line.startswith("ok") for line in lines[:-1])


def test_a_reference_too_slow_at_the_cpu_size_is_named(monkeypatch):
    monkeypatch.setattr(task_check, "SLOW_CPU_S", 0.0)  # every forward takes longer than nothing
    found = task_check.check_task(from_path(OWN / "level1" / "1_ClampScale.py")[0])
    assert found.reason.startswith("too slow at the cpu size")


def test_the_example_task_of_the_docs_passes_the_check(tmp_path):
    text = (Path(__file__).resolve().parents[2] / "docs" / "tasks.md").read_text()
    example = text.split("```python\n")[1].split("```")[0]
    (tmp_path / "my_ops" / "level1").mkdir(parents=True)
    (tmp_path / "my_ops" / "level1" / "1_SoftsignGain.py").write_text(example)
    [found] = task_check.check_source(str(tmp_path / "my_ops"))
    assert found.ok and found.name == "my_ops/L1/1_SoftsignGain", found.reason
