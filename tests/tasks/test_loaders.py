"""Each source of tasks: bundled, KernelBench-layout folder, HF-format dataset, user paths."""

import json

import pytest

from kernelgym.errors import SuiteUnavailableError, TaskFormatError, TaskNotFoundError
from kernelgym.tasks import bundled, content_hash, from_hf_dataset, from_path, kernelbench, load_suite

PROBLEM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.relu(x) * self.scale

batch_size = 16
dim = 32

def get_inputs():
    return [torch.rand(batch_size, dim)]

def get_init_inputs():
    return [2.0]
'''


def make_kernelbench(root, per_level=(3, 2, 1)):
    for level, count in zip((1, 2, 3), per_level):
        folder = root / "KernelBench" / f"level{level}"
        folder.mkdir(parents=True)
        for i in range(1, count + 1):
            (folder / f"{i}_Conv_ReLU_{i}.py" if level == 2 else folder / f"{i}_Op{i}.py").write_text(PROBLEM)
    return root


def test_kernelbench_folder_lists_every_level(tmp_path):
    tasks = kernelbench(make_kernelbench(tmp_path))
    assert [t.level for t in tasks] == [1, 1, 1, 2, 2, 3]
    first = tasks[0]
    assert first.id == "kernelbench/L1/1_Op1" and first.suite == "kernelbench" and first.problem_id == 1
    assert tasks.filter(level=2)[0].category == "convolution"  # guessed from the name


def test_kernelbench_root_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELBENCH_ROOT", str(make_kernelbench(tmp_path)))
    assert len(load_suite("kernelbench", level=1)) == 3


def test_missing_kernelbench_says_how_to_get_it(monkeypatch):
    monkeypatch.delenv("KERNELBENCH_ROOT", raising=False)
    with pytest.raises(SuiteUnavailableError, match="KERNELBENCH_ROOT"):
        kernelbench()


def test_hf_format_dataset_built_locally():
    datasets = pytest.importorskip("datasets")  # the `agents` extra; plain rows are tested below either way
    rows = {f"level_{lv}": datasets.Dataset.from_list(
        [{"code": PROBLEM, "level": lv, "name": f"{i}_Op{i}.py", "problem_id": i} for i in range(1, 3)])
        for lv in (1, 2, 3)}
    tasks = from_hf_dataset(datasets.DatasetDict(rows))
    assert len(tasks) == 6 and tasks[0].id == "kernelbench/L1/1_Op1"


def test_hf_rows_with_the_dataset_columns():
    rows = {"level_1": [{"code": PROBLEM, "level": 1, "name": "19_ReLU", "problem_id": 19}],
            "level_2": [{"code": PROBLEM, "level": 2, "name": "7_Gemm_Add.py", "problem_id": 7}]}
    tasks = from_hf_dataset(rows)
    assert [t.id for t in tasks] == ["kernelbench/L1/19_ReLU", "kernelbench/L2/7_Gemm_Add"]


def test_user_file_and_folder(tmp_path):
    path = tmp_path / "level2" / "5_MyChain.py"
    path.parent.mkdir()
    path.write_text(PROBLEM)
    assert from_path(path)[0].level == 2
    assert from_path(tmp_path)[0].id == f"{tmp_path.name}/L2/5_MyChain"  # named after the folder
    with pytest.raises(TaskNotFoundError):
        from_path(tmp_path / "missing.py")


def test_a_file_without_model_is_rejected_clearly(tmp_path):
    path = tmp_path / "1_Bad.py"
    path.write_text("x = 1\n")
    with pytest.raises(TaskFormatError, match="Model"):
        list(from_path(path))


def test_content_hash_ignores_comments_and_whitespace():
    noisy = PROBLEM.replace("def forward(self, x):", "def forward(self, x):   # the reference\n\n")
    assert content_hash(noisy) == content_hash(PROBLEM)
    assert content_hash(PROBLEM.replace("* self.scale", "+ self.scale")) != content_hash(PROBLEM)


def test_cpu_size_substitutes_constants_and_derived_ones_follow():
    source = PROBLEM.replace("dim = 32",
                             "dim = 32\nhidden = dim * 4") + '\nKERNELGYM = {"sizes": {"cpu": {"dim": 8}}}\n'
    from kernelgym.tasks import task_from_source

    task = task_from_source(source, suite="user", level=1, file_name="1_X.py")
    namespace: dict = {}
    exec(task.source_at("cpu"), namespace)  # noqa: S102 - the bundled reference module, trusted
    assert namespace["dim"] == 8 and namespace["hidden"] == 32 and namespace["batch_size"] == 16


def test_taskset_is_lazy_and_composes(tmp_path):
    loads = []

    def counting():
        loads.append(1)
        return list(kernelbench(make_kernelbench(tmp_path)))

    from kernelgym.tasks import TaskSet

    tasks = TaskSet(counting)
    view = tasks.filter(level=1).shuffle(seed=3).head(2)
    assert loads == []  # nothing read until iterated
    assert len(view) == 2 and all(t.level == 1 for t in view)
    assert view.ids() == tasks.filter(level=1).shuffle(seed=3).head(2).ids()  # deterministic for a seed
    assert tasks.filter(name="op2").ids() == ["kernelbench/L1/2_Op2"]


def test_cli_lists_kernelbench_as_json(tmp_path):
    from typer.testing import CliRunner

    from kernelgym.cli import app

    result = CliRunner().invoke(app, ["tasks", "list", "--suite", "kernelbench", "--kernelbench-root",
                                      str(make_kernelbench(tmp_path)), "--json"])
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert result.exit_code == 0 and len(rows) == 6
    assert {"id", "suite", "level", "name", "category"} <= set(rows[0])


def test_cli_reports_a_missing_checkout_without_a_traceback(monkeypatch):
    from typer.testing import CliRunner

    from kernelgym.cli import app

    monkeypatch.delenv("KERNELBENCH_ROOT", raising=False)
    result = CliRunner().invoke(app, ["tasks", "list", "--suite", "kernelbench"])
    assert result.exit_code == 1 and "KERNELBENCH_ROOT" in result.output and "Traceback" not in result.output


def test_bundled_suite_is_there():
    assert bundled().get("L1/1_ReLU").category == "activation"
