"""Nsight Compute metrics per kernel (opt-in: EvalOptions.ncu), where `ncu` works on the host.

After a candidate has passed the judge, one more sandboxed process runs one forward call under
`ncu --profile-from-start off` (only that call is profiled, not the reference or the warm-up) and the
hardware counters of each of its kernels come back: memory and compute throughput as % of peak, achieved
occupancy, registers per thread and local-memory (spill) traffic. The metrics only inform the agent: a failure
here never changes the verdict, it becomes a note.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from kernelgym.evaluation.result import KernelMetrics

# KernelMetrics field -> ncu metric, in order of preference (names differ between ncu versions).
METRICS: dict[str, tuple[str, ...]] = {
    "duration_us": ("gpu__time_duration.sum",),
    "memory_throughput_pct": ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",),
    "compute_throughput_pct": ("sm__throughput.avg.pct_of_peak_sustained_elapsed",),
    "achieved_occupancy_pct": ("sm__warps_active.avg.pct_of_peak_sustained_active",),
    "registers_per_thread": ("launch__registers_per_thread",),
    "local_load_instructions": ("smsp__sass_inst_executed_op_local_ld.sum",
                                "smsp__inst_executed_op_local_ld.sum"),
    "local_store_instructions": ("smsp__sass_inst_executed_op_local_st.sum",
                                 "smsp__inst_executed_op_local_st.sum"),
}
MAX_KERNELS = 64  # launches profiled from the one forward call
CORE = ("duration_us", "memory_throughput_pct", "compute_throughput_pct", "achieved_occupancy_pct",
        "registers_per_thread")  # the fallback when ncu rejects a metric name
_TO_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6,
          "second": 1e6}


def ncu_path() -> str | None:
    return shutil.which("ncu")


@functools.lru_cache(maxsize=1)
def available_metrics() -> frozenset[str]:
    """Base names of the metrics this host's ncu and GPU support (empty if the query fails)."""
    path = ncu_path()
    if path is None:
        return frozenset()
    try:
        out = subprocess.run([path, "--query-metrics", "--csv"], capture_output=True, text=True, timeout=60,
                             check=False)
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    names = set()
    for row in csv.reader(io.StringIO(out.stdout)):
        if row and not row[0].startswith("=="):
            names.add(row[0].strip().strip('"'))
    return frozenset(names)


def chosen_metrics(available: frozenset[str]) -> dict[str, str]:
    """Field -> the first of its metrics that the host supports (all of them when the query gave nothing).
    Launch attributes (`launch__*`), not hardware counters nor in ncu's metric list, are always asked for."""
    chosen = {}
    for name, options in METRICS.items():
        for metric in options:
            if not available or metric.startswith("launch__") or metric.split(".")[0] in available:
                chosen[name] = metric
                break
    return chosen


def command(ncu: str, metrics: dict[str, str], job_dir: str) -> list[str]:
    return [ncu, "--profile-from-start", "off", "--clock-control", "none", "--target-processes", "all",
            "--csv", "--page", "details", "--print-units", "base", "--launch-count", str(MAX_KERNELS),
            "--metrics", ",".join(sorted(set(metrics.values()))),
            sys.executable, "-m", "kernelgym.workers.ncu_child", job_dir]


def parse(text: str, metrics: dict[str, str]) -> list[KernelMetrics]:
    """ncu's `--csv --page details` output: one row per (kernel launch, metric)."""
    start = next((i for i, line in enumerate(text.splitlines()) if line.startswith('"ID"')), None)
    if start is None:
        return []
    by_metric = {metric: name for name, metric in metrics.items()}
    launches: dict[str, KernelMetrics] = {}
    for row in csv.DictReader(io.StringIO("\n".join(text.splitlines()[start:]))):
        launch_id, kernel = row.get("ID"), row.get("Kernel Name")
        name = by_metric.get(row.get("Metric Name", ""))
        if launch_id is None or kernel is None:
            continue
        entry = launches.setdefault(launch_id, KernelMetrics(kernel=kernel))
        if name is None:
            continue
        value = _number(row.get("Metric Value", ""))
        if value is not None and name == "duration_us":
            value *= _TO_US.get(row.get("Metric Unit", "").strip(), 1.0)
        setattr(entry, name, value)
    return list(launches.values())


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def collect(job_dir: str, job: dict, sandbox, timeout_s: float) -> tuple[list[KernelMetrics], str]:
    """Run the profiled forward call; (kernels, note). The note says why there are none, or what it cost."""
    ncu = ncu_path()
    if ncu is None:
        return [], "ncu: Nsight Compute is not on this host's PATH"
    metrics = chosen_metrics(available_metrics())
    with open(os.path.join(job_dir, "job.json"), "w") as f:
        json.dump({**job, "sandbox": sandbox.__dict__}, f)
    kernels, note = _profile(ncu, metrics, job_dir, timeout_s)
    if not kernels and "metric" in note.lower() and set(metrics) != set(CORE):
        # An unknown metric name makes ncu profile nothing: once more with the names every version has.
        kernels, note = _profile(ncu, {k: v for k, v in metrics.items() if k in CORE}, job_dir, timeout_s)
    return kernels, note


def _profile(ncu: str, metrics: dict[str, str], job_dir: str,
             timeout_s: float) -> tuple[list[KernelMetrics], str]:
    started = time.monotonic()
    proc = subprocess.Popen(command(ncu, metrics, job_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill(proc, job_dir)
        return [], f"ncu: profiling ran past {timeout_s:.0f} s"
    spent = time.monotonic() - started
    kernels = parse(stdout, metrics)
    if not kernels:
        errors = [ln for ln in (stdout + stderr).splitlines() if "ERROR" in ln or "WARNING" in ln]
        detail = ": " + errors[0][:200] if errors else ""
        return [], f"ncu: no kernel was profiled (exit {proc.returncode}){detail}"
    return kernels, f"ncu: {len(kernels)} kernel launch(es) profiled in {spent:.1f} s"


def _kill(proc: subprocess.Popen, job_dir: str) -> None:
    """ncu's process group, and the profiled process, which left it for a session of its own (sandbox)."""
    for group in (proc.pid, _child_pid(job_dir)):
        if group:
            try:
                os.killpg(group, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    # Not communicate(): a survivor holding the pipes would block it forever.
    for pipe in (proc.stdout, proc.stderr):
        pipe.close()
    proc.wait(timeout=10)


def _child_pid(job_dir: str) -> int | None:
    try:
        return int(Path(job_dir, "child.pid").read_text())
    except (OSError, ValueError):
        return None
