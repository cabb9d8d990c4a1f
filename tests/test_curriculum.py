"""The generated curriculum (kernelgym.tasks.curriculum): graded KernelBench-format tasks with honest cpp and
Triton solutions, disjoint train / held-out splits, and the success-rate task sampler.

The Triton solutions run in Triton's interpreter on the CPU (TRITON_INTERPRET=1, in a subprocess); a
sample of the cpp solutions goes through the real judge.
"""

from __future__ import annotations

import ast
import json
import os
import random
import subprocess
import sys
from collections import Counter

import pytest

from kernelgym.errors import ConfigError
from kernelgym.tasks import from_path, load_suite, resolve_task
from kernelgym.tasks.curriculum import (
    SuccessSampler,
    curriculum,
    heldout_ids,
    ops,
    splits,
    train_ids,
    write_curriculum,
)

FAMILIES = {"unary", "activation", "binary", "fused", "row_reduction", "fused_row"}


def test_at_least_sixty_graded_tasks_in_every_family():
    items = curriculum()
    assert len(items) >= 60 and len({i.id for i in items}) == len(items)
    assert {i.op.family for i in items} == FAMILIES
    assert sorted({i.difficulty for i in items}) == [1, 2, 3, 4]
    assert [i.difficulty for i in items] == sorted(i.difficulty for i in items)  # easiest first
    for item in items:
        assert item.task.suite == "curriculum" and item.task.has_size("cpu")
        tree = ast.parse(item.task.source)
        assert {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)} >= \
            {"Model", "get_inputs", "get_init_inputs"}
        for backend, source in item.solutions.items():
            names = {n.name for n in ast.parse(source).body if isinstance(n, ast.ClassDef)}
            assert names == {"ModelNew"}, (item.id, backend)
        assert "load_cpp(" in item.solutions["cpp"] and "@triton.jit" in item.solutions["triton"]
        assert "torch." not in item.solutions["cpp"].split("def forward")[1].split("_lib.")[1]  # no torch op


def test_splits_are_disjoint_stratified_and_stable():
    train, held = set(train_ids()), set(heldout_ids())
    assert not train & held and len(held) >= 20 and len(train) >= 40
    assert train | held == {i.id for i in curriculum()}
    by_family = Counter((i.op.family, i.split) for i in curriculum())
    for family in FAMILIES:  # every family is on both sides
        assert by_family[(family, "train")] and by_family[(family, "heldout")]
    assert heldout_ids() == heldout_ids() and [i.id for i in curriculum("heldout")] == heldout_ids()
    # the split follows the names, not the order: shuffling the ops changes nothing
    shuffled = ops()
    random.Random(3).shuffle(shuffled)
    assert splits(shuffled) == splits(ops())
    with pytest.raises(ConfigError):
        curriculum("test")


def test_written_folder_and_the_suite_name_load_the_same_tasks(tmp_path):
    root = write_curriculum(tmp_path / "cur")
    loaded = list(from_path(root))
    items = curriculum()
    assert len(loaded) == len(items)
    assert sorted((t.level, t.problem_id, t.name, t.category) for t in loaded) == \
        sorted((i.task.level, i.task.problem_id, i.task.name, i.task.category) for i in items)
    layout = json.loads((root / "splits.json").read_text())
    assert len(layout["heldout"]) == len(heldout_ids())
    assert (root / "solutions" / "triton" / "level2").is_dir()
    assert len(load_suite("curriculum")) == len(items) and len(load_suite("curriculum", level=2)) < len(items)
    assert resolve_task(heldout_ids()[0]).id == heldout_ids()[0]


_INTERPRET = r"""
import os, sys, types
os.environ["TRITON_INTERPRET"] = "1"
import torch
from kernelgym.tasks.curriculum import curriculum
bad = []
for item in curriculum():
    ref = {}
    small = item.task.source.replace("batch_size = 4096", "batch_size = 3")
    exec(small.replace("dim = 16384", "dim = 2500"), ref)
    mod = types.ModuleType("sol_" + item.op.name)
    mod.__file__ = os.path.join(sys.argv[1], mod.__name__ + ".py")  # the interpreter reads the kernel's file
    open(mod.__file__, "w").write(item.solutions["triton"])
    sys.modules[mod.__name__] = mod
    exec(compile(item.solutions["triton"], mod.__file__, "exec"), mod.__dict__)
    for trial in range(2):
        torch.manual_seed(trial)
        inputs = ref["get_inputs"]()
        if trial:  # scaled and shifted, as the judge's perturbed trial
            inputs = [x * 3.0 + (0.0 if item.op.inputs == "positive" else -1.0) for x in inputs]
        want, got = ref["Model"]()(*inputs), mod.ModelNew()(*inputs)
        if got.shape != want.shape or not torch.allclose(got, want, atol=1e-4, rtol=1e-4):
            bad.append(item.op.name)
            break
print("BAD", bad)
"""


def test_triton_solutions_match_the_reference_in_the_interpreter(tmp_path):
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-c", _INTERPRET, str(tmp_path)], capture_output=True, text=True,
                         env=env, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "BAD []"


@pytest.mark.slow
def test_a_sample_of_cpp_solutions_is_judged_ok(pool):
    """One task of each family through the real judge on the CPU (benchmarks/results/agents/davinci.md: all of
    them)."""
    items = curriculum()
    sample = [next(i for i in items if i.op.family == family) for family in sorted(FAMILIES)]
    fast = {"timing_trials": 5, "timing_budget_s": 0.3, "profile": False}
    futures = [pool.submit(i.task, i.solutions["cpp"], backend="cpp", size="cpu", **fast) for i in sample]
    verdicts = {i.op.name: str(f.result().verdict) for i, f in zip(sample, futures)}
    assert set(verdicts.values()) == {"ok"}, verdicts


def test_a_wrong_cpp_solution_is_not_judged_ok(pool):
    """The judge can tell: the Exp task answered with the Expm1 kernel fails."""
    by_name = {i.op.name: i for i in curriculum()}
    wrong = by_name["Expm1"].solutions["cpp"]
    result = pool.evaluate(by_name["Exp"].task, wrong, backend="cpp", size="cpu", timing_trials=3,
                           profile=False)
    assert str(result.verdict) == "incorrect"


# the sampler ------------------------------------------------------------------------------------------------

def test_sampler_starts_easy_and_unlocks_by_success():
    sampler = SuccessSampler({"e1": 1, "e2": 1, "m1": 2, "h1": 3}, window=4, unlock_at=0.5)
    rng = random.Random(0)
    assert sampler.unlocked() == 1
    assert set(sampler.sample(4, rng)) == {"e1", "e2"}  # only the unlocked difficulty, distinct ids
    for _ in range(4):
        sampler.update("e1", True)
    sampler.update("e2", False)
    assert sampler.unlocked() == 2  # mean recent success of the easy tasks: (1 + 0) / 2 >= 0.5
    assert "m1" in sampler.weights() and "h1" not in sampler.weights()  # m1 untried: 3 stays locked
    sampler.update("m1", False)
    assert sampler.unlocked() == 2
    sampler.update("m1", True)
    assert sampler.unlocked() == 3


def test_sampler_prefers_tasks_at_the_edge_of_ability():
    sampler = SuccessSampler({"solved": 1, "edge": 1, "hopeless": 1}, window=8)
    for _ in range(8):
        sampler.update("solved", True)
        sampler.update("hopeless", False)
    for outcome in [True, False] * 4:
        sampler.update("edge", outcome)
    w = sampler.weights()
    assert w["edge"] > w["solved"] and w["edge"] > w["hopeless"] > 0
    rng = random.Random(1)
    first = Counter(sampler.sample(1, rng)[0] for _ in range(400))
    assert first["edge"] > first["solved"] and first["edge"] > first["hopeless"]

    again = SuccessSampler({"solved": 1, "edge": 1, "hopeless": 1}, window=8)
    again.load(json.loads(json.dumps(sampler.state())))  # a checkpoint round trip
    assert again.weights() == w


def test_command_line_writes_the_folder(tmp_path, capsys):
    from kernelgym.tasks.curriculum import main

    assert main(["write", str(tmp_path / "cur")]) == 0
    assert (tmp_path / "cur" / "splits.json").is_file() and str(tmp_path / "cur") in capsys.readouterr().out
