"""benchmarks/judge_speed/gpu_results.py runs on scarce GPU time: its --smoke mode runs every phase on the CPU
first."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "judge_speed" / "gpu_results.py"


@pytest.mark.slow
def test_every_phase_of_the_gpu_results_script_runs_and_is_reported(tmp_path):
    out = tmp_path / "RESULTS.md"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--repeats", "2", "--copies", "1",
                           "--workers", "2", "--out", str(out)], capture_output=True, text=True, timeout=1200,
                          cwd=SCRIPT.parent, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.with_suffix(".json").read_text())
    walls = {row["solution"]: row for row in data["wall"]}
    assert len(walls) == 2  # the lean form and the KernelBench-format load_inline form
    for row in walls.values():
        assert [r["verdict"] for r in row["kernelgym"]] == ["ok", "ok"], row
        assert all("error" not in r for r in row["kernelbench_style"]), row
    assert data["agreement"] and all(r["kernelgym_speedups"] for r in data["agreement"])
    assert all(v == "ok" for v in data["throughput"]["verdicts"])
    assert data["ncu"] and all("ran on the CPU" in r["note"] for r in data["ncu"])
    text = out.read_text()
    for section in ("## Wall time", "## Speedup agreement", "## Throughput", "## Nsight Compute"):
        assert section in text
