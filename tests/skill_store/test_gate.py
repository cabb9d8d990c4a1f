"""The verification gate, on kernelgym's real judge (cpp backend, CPU size).

Admission uses the bundled fused Conv2d+MaxPool+HardSwish solution at the default threshold 1.0 (2.46-2.58x
on the 2-core VM, five evaluations). The fused Conv2d+ReLU+bias one (1.32-1.37x quiet) once measured 1.15x
under CI's load, unverified, and a gate that needs every run verified then rightly refused it. The bundled
OpenMP ReLU runs at only about 0.9x of torch.relu there (both sides are timed on one thread and torch's kernel
is already vectorized), so the tests that use it as an honest-but-unremarkable kernel pass a threshold of 0.5.
"""

import json
from pathlib import Path

import pytest

import kernelgym
from kernelgym.errors import TaskNotFoundError
from kernelgym.skill_store import SkillStore
from kernelgym.skill_store.gate import Candidate, Gate, GateConfig, read_candidates
from kernelgym.skill_store.skill import SkillFormatError
from kernelgym.skill_store.store import SkillExistsError

SOLUTIONS = Path(kernelgym.__file__).parent / "solutions"
HONEST = SOLUTIONS / "cpp" / "level1" / "1_ReLU.py"
FUSED_CONV = SOLUTIONS / "cpp" / "level2" / "6_Conv2d_MaxPool_HardSwish.py"
CONV_TASK = "bundled/L2/6_Conv2d_MaxPool_HardSwish"
PASSTHROUGH = SOLUTIONS / "cheats" / "cpp" / "level1" / "1_ReLU__pytorch_passthrough.py"
SLOW = Path(__file__).with_name("solutions") / "relu_slow.py"
RELU = "bundled/L1/1_ReLU"
# shorter timing per run (the interval is still computed); a shared machine's load does not withhold the
# verification these tests ask for (tests/evaluation/test_contention.py judges that)
FAST_TIMING = {"timing_budget_s": 1.0, "max_contention": 1.0}


def candidate(skill_id, path, task_ids=(RELU,), **skill):
    return Candidate.from_dict(
        {
            "id": skill_id,
            "title": "OpenMP SIMD elementwise ReLU",
            "technique": "One parallel simd loop.",
            "applies_when": {"patterns": ["relu", "elementwise"], "bound": "memory", "backends": ["cpp"]},
            "solution_path": str(path),
            "task_ids": list(task_ids),
            "size": "cpu",
            **skill,
        }
    )


def gate(pool, threshold=0.5, runs=3):
    return Gate(GateConfig(runs=runs, threshold=threshold, eval_options=FAST_TIMING), pool=pool)


@pytest.mark.slow
def test_honest_solution_is_admitted_with_evidence(pool, db_path):
    store = SkillStore(db_path, seed=False)
    fused = candidate("cpp-conv-pool-hardswish-fused", FUSED_CONV, task_ids=(CONV_TASK,))
    decision = gate(pool, threshold=1.0).submit(store, fused)
    assert decision.admitted, decision.reason
    assert [r.verdict for r in decision.runs] == ["ok"] * 3
    assert all(r.verified_speedup > 1.0 for r in decision.runs)
    skill = store.get("cpp-conv-pool-hardswish-fused")
    assert skill.status == "admitted" and skill.provenance.source == "distilled"
    assert skill.solution.task_ids == [CONV_TASK] and "ModelNew" in skill.solution.source
    (evidence,) = skill.evidence
    slowest = min(r.verified_speedup for r in decision.runs)
    assert evidence.task_id == CONV_TASK and evidence.speedup == pytest.approx(slowest, abs=1e-3)
    assert evidence.hardware and evidence.date
    (entry,) = skill.history
    assert entry.admitted and entry.verdicts == ["ok"] * 3 and len(entry.speedups) == 3

    # Re-verifying the whole library is one call: seeds without a solution are skipped, the rest re-run.
    store.put(SkillStore(db_path.with_name("seeded.sqlite")).list()[0])
    decisions = gate(pool, threshold=1.0, runs=1).reverify(store)
    by_id = {d.skill_id: d for d in decisions}
    fused = by_id["cpp-conv-pool-hardswish-fused"]
    assert fused.admitted and not fused.skipped
    assert sum(d.skipped for d in decisions) == 1
    again = store.get("cpp-conv-pool-hardswish-fused")
    assert len(again.history) == 2 and again.version == skill.version + 1 and len(again.evidence) == 1

    # A bar the kernel cannot clear demotes it on re-verification, and the reason is kept.
    (decision,) = gate(pool, threshold=10.0, runs=1).reverify(store, ["cpp-conv-pool-hardswish-fused"])
    assert not decision.admitted
    demoted = store.get("cpp-conv-pool-hardswish-fused")
    assert demoted.status == "rejected" and "not verified above 10" in demoted.history[-1].reason


@pytest.mark.slow
def test_pytorch_passthrough_is_rejected_and_kept(pool, db_path):
    store = SkillStore(db_path, seed=False)
    decision = gate(pool).submit(store, candidate("cpp-relu-passthrough", PASSTHROUGH))
    assert not decision.admitted
    assert decision.runs[0].verdict == "hack" and len(decision.runs) == 1  # stops at the first failure
    kept = store.get("cpp-relu-passthrough")
    assert kept.status == "rejected" and not kept.evidence
    assert "verdict hack" in kept.history[0].reason and "torch_compute" in kept.history[0].reason


@pytest.mark.slow
def test_speedup_below_threshold_is_rejected(pool, db_path):
    store = SkillStore(db_path, seed=False)
    decision = gate(pool).submit(store, candidate("cpp-relu-slow", SLOW))
    assert not decision.admitted
    run = decision.runs[0]
    assert run.verdict == "ok" and run.speedup is not None and run.speedup < 0.5
    assert "not verified above 0.5" in decision.reason
    assert store.get("cpp-relu-slow").status == "rejected"


@pytest.mark.slow
def test_every_source_task_must_pass(pool, db_path):
    # The ReLU kernel is wrong for a GEMM task: passing on ReLU alone is not enough.
    store = SkillStore(db_path, seed=False)
    decision = gate(pool, runs=1).submit(
        store, candidate("cpp-relu-two-tasks", HONEST, task_ids=(RELU, "bundled/L2/1_Gemm_BiasAdd_ReLU"))
    )
    assert not decision.admitted
    assert [r.task_id for r in decision.runs] == [RELU, "bundled/L2/1_Gemm_BiasAdd_ReLU"]
    assert decision.runs[0].verdict == "ok" and decision.runs[1].verdict != "ok"
    assert "bundled/L2/1_Gemm_BiasAdd_ReLU run 1" in decision.reason


def test_unknown_task_fails_before_any_run(db_path):
    store = SkillStore(db_path, seed=False)
    with pytest.raises(TaskNotFoundError):
        Gate().submit(store, candidate("cpp-relu-nowhere", HONEST, task_ids=("bundled/L9/404_Nothing",)))
    assert len(store) == 0


def test_candidate_cannot_replace_a_seed_skill(db_path):
    store = SkillStore(db_path)
    with pytest.raises(SkillExistsError, match="seed"):
        Gate().submit(store, candidate("online-softmax", HONEST))


def test_candidate_files(tmp_path):
    sol = tmp_path / "sol.py"
    sol.write_text(HONEST.read_text())
    row = {
        "skill": {"id": "cpp-x", "title": "t", "technique": "x", "applies_when": {"backends": ["cpp"]}},
        "solution_path": "sol.py",
        "task_ids": RELU,
    }
    (tmp_path / "one.json").write_text(json.dumps(row))
    (tmp_path / "many.jsonl").write_text(
        json.dumps(row) + "\n" + json.dumps({**row, "skill": {**row["skill"], "id": "cpp-y"}}) + "\n"
    )
    (one,) = read_candidates(tmp_path / "one.json")
    assert (
        one.solution.task_ids == [RELU] and one.solution.backend == "cpp" and one.skill.status == "candidate"
    )
    assert [c.skill.id for c in read_candidates(tmp_path / "many.jsonl")] == ["cpp-x", "cpp-y"]
    (tmp_path / "nosol.json").write_text(json.dumps({**row, "solution_path": "missing.py"}))
    with pytest.raises(SkillFormatError, match="cannot read solution"):
        read_candidates(tmp_path / "nosol.json")
    (tmp_path / "bad.json").write_text("{oops")
    with pytest.raises(SkillFormatError, match="bad JSON"):
        read_candidates(tmp_path / "bad.json")


def test_a_run_the_judge_failed_decides_nothing_and_stores_nothing(db_path):
    from kernelgym.skill_store.skill import Solution
    from kernelgym.workers.pool import EvalPool

    store = SkillStore(db_path, seed=False)
    # A real pool whose disk is "full" (no folder has 2**40 MiB free): every run is infrastructure_error.
    with EvalPool(workers=1, gpu=False, infra_retries=0, min_free_disk_mb=1 << 40) as broken:
        decision = gate(broken).submit(store, candidate("cpp-relu-omp", HONEST))
        assert decision.not_judged and not decision.admitted and decision.state == "not judged"
        assert [r.verdict for r in decision.runs] == ["infrastructure_error"] * 3
        assert store.find("cpp-relu-omp") is None  # neither admitted nor rejected

        admitted = candidate("cpp-relu-admitted", HONEST).skill
        admitted.status = "admitted"
        admitted.solution = Solution(source=HONEST.read_text(), task_ids=[RELU], backend="cpp", size="cpu")
        store.put(admitted)
        (again,) = gate(broken, runs=1).reverify(store, ["cpp-relu-admitted"])
    assert again.not_judged
    kept = store.get("cpp-relu-admitted")
    assert kept.status == "admitted" and not kept.history  # never demoted by the judge's own failure
