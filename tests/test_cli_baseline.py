"""`kernelgym baseline`: reference times per task, cached per fingerprint, reused by evaluations."""

import json

import pytest
from typer.testing import CliRunner

from kernelgym.cli import app
from kernelgym.evaluation.feedback import render_feedback


def _rows(result):
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def test_baseline_measures_then_reuses(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELGYM_CACHE", str(tmp_path))
    args = ["baseline", "--level", "1", "--json"]
    first = _rows(CliRunner().invoke(app, args))
    assert len(first) >= 40 and all(r["verdict"] == "ok" and r["eager_ms"] > 0 for r in first)
    assert not any(r["cached"] for r in first)
    second = _rows(CliRunner().invoke(app, args))
    assert all(r["cached"] for r in second)
    assert [r["eager_ms"] for r in second] == [r["eager_ms"] for r in first]


@pytest.mark.slow
def test_compile_baseline_is_cached_and_used_by_evaluations(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELGYM_CACHE", str(tmp_path))
    import kernelgym
    from kernelgym.solutions import examples
    from kernelgym.tasks import bundled

    task = bundled().get("L1/1_ReLU")
    with kernelgym.EvalPool(workers=1) as pool:
        measured = pool.evaluate(task, "", backend="cpp", baseline_only=True, compile_baseline=True,
                                 timeout_s=300)
        assert measured.timing.compile_ms > 0 and not measured.timing.compile_baseline_cached
        example = next(e for e in examples("cpp") if e.task_id == task.id)
        result = pool.evaluate(task, example.source, backend="cpp", compile_baseline=True)
    assert result.timing.compile_baseline_cached
    assert result.timing.compile_ms == pytest.approx(measured.timing.compile_ms, abs=1e-6)
    assert result.timing.speedup_vs_compile > 0 and "torch.compile" in render_feedback(result)
