"""benchmarks/scale/ray_multi_gpu.py runs on scarce multi-GPU time: its candidate mix and report are checked
here, and its --smoke mode runs the whole path (Ray, one actor per fake GPU, 1 then 2 GPUs) on the CPU."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "scale" / "ray_multi_gpu.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("ray_multi_gpu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_hundred_candidates_mix_kinds_and_are_all_new(bench):
    items = bench.candidates(100, smoke=False, kernelbench=None)
    kinds = [c["kind"] for c in items]
    assert (kinds.count("triton"), kinds.count("cuda"), kinds.count("kb_format")) == (40, 40, 20)
    assert len({c["source"] for c in items}) == 100  # no two alike: each builds anew
    assert len({c["id"] for c in items}) == 100
    assert items == bench.candidates(100, smoke=False, kernelbench=None)  # the same on every run
    for c in items:
        if c["backend"] == "cuda":  # the marker is in what the compiler sees, not only in the Python
            assert "/* ray_multi_gpu candidate" in c["source"]
    kb_format = [c for c in items if c["kind"] == "kb_format"]
    assert all(c["backend"] == "cuda" and "load_inline" in c["source"] for c in kb_format)


def _run(gpus: int, rows: list[dict], per_minute: float) -> dict:
    return {"gpus": gpus, "judged": len(rows), "per_minute": per_minute, "rows": rows,
            "actors": [{"busy_fraction": 0.9}] * gpus}


def _row(cid: str, verdict: str, speedup: float | None, ci=None) -> dict:
    return {"id": cid, "verdict": verdict, "speedup": speedup, "ci": ci}


def test_the_report_compares_each_run_with_the_fewest_gpus(bench):
    one = _run(1, [_row("a", "ok", 1.0, [0.95, 1.05]), _row("b", "ok", 2.0), _row("c", "incorrect", None)],
               20)
    four = _run(4, [_row("a", "ok", 1.3, [1.0, 1.6]), _row("b", "ok", 3.0, [2.9, 3.1]),
                    _row("c", "ok", 1.0)], 70)
    summary = bench.compare([four, one])
    assert summary[1]["scale"] == 1.0 and summary[1]["verdicts_changed"] == []
    assert summary[4]["scale"] == 3.5 and summary[4]["verdicts_changed"] == ["c"]
    assert (summary[4]["timed"], summary[4]["timings_agree"]) == (2, 1)  # a's intervals overlap; b's differ
    table = bench.markdown([one, four], "test host")
    assert "| 4 | 3 | 70 | 3.5x | 0.90, 0.90, 0.90, 0.90 | 1 of 3 | 1 of 2 |" in table


@pytest.mark.slow
def test_smoke_run_end_to_end_on_fake_gpus(tmp_path):
    command = [sys.executable, str(SCRIPT), "--smoke", "--candidates", "2", "--out", str(tmp_path)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "ray_multi_gpu.json").read_text())
    runs = {run["gpus"]: run for run in report["runs"]}
    assert sorted(runs) == [1, 2]
    assert all((tmp_path / f"ray_multi_gpu_{n}.json").exists() for n in (1, 2))
    for n, run in runs.items():
        assert run["judged"] == 2 and run["per_minute"] > 0
        assert len(run["actors"]) == n  # one actor per (fake) GPU, each with its own timing slot
        assert len({a["lock_dir"] for a in run["actors"]}) == n
        assert [r["verdict"] for r in run["rows"]] == ["ok", "ok"], run["rows"]
    assert report["summary"]["2"]["verdicts_changed"] == []
    assert "| 2 | 2 |" in (tmp_path / "ray_multi_gpu.md").read_text()
