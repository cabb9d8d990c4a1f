"""The bench runner: the quickstart path, resumption after a kill or an exception, the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelgym.agents.bench import run_bench
from kernelgym.agents.bench_config import BenchConfig, BenchError
from kernelgym.agents.bench_plan import expand_env_ids, select
from kernelgym.agents.bench_results import ResultsFile
from kernelgym.agents.policies import make_policy
from kernelgym.agents.policies.scripted import ScriptedPolicy

LENIENT_JUDGE = {"timing_budget_s": 1.0}  # see conftest.py


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_env_ids_and_task_selection():
    assert expand_env_ids("KernelGym-v0") == ["KernelGym-L1-v0", "KernelGym-L2-v0", "KernelGym-L3-v0"]
    assert expand_env_ids("KernelGym-L2-v0,KernelGym-L1-v0") == ["KernelGym-L2-v0", "KernelGym-L1-v0"]
    with pytest.raises(BenchError, match="unknown environment"):
        expand_env_ids("Nope-v0")
    ids = ["bundled/L1/1_ReLU", "bundled/L1/2_Matmul_Square", "bundled/L2/1_Gemm_BiasAdd_ReLU"]
    replay = make_policy("replay:cpp")
    assert select(ids, "auto", replay) == [i for i in ids if replay.covers(i)]
    assert "bundled/L1/1_ReLU" in select(ids, "auto", replay)
    assert select(ids, "auto", ScriptedPolicy(["x"])) == ids  # no coverage declared: every task
    assert select(ids, "all", replay) == ids
    assert select(ids, "L1/*", replay) == ids[:2]
    assert select(ids, "ReLU", replay) == [ids[0], ids[2]]  # a plain word is a substring
    assert select(ids, "*Matmul*,L2/1_*", replay) == ids[1:]
    with pytest.raises(BenchError):
        select(ids, "covered", ScriptedPolicy(["x"]))


@pytest.mark.slow
def test_quickstart_replay_with_cheats_and_rerun(tmp_path):
    out = tmp_path / "run"
    config = BenchConfig(policy="replay:cpp+cheats", tasks="L1/1_ReLU,L2/1_Gemm_BiasAdd_ReLU", out=str(out),
                         eval_options=LENIENT_JUDGE)
    first = run_bench(config, progress=False)
    assert first.ran == 2 and first.skipped == 0 and not first.errors
    s = first.summary
    assert s["overall"]["finished"] == 2 and s["overall"]["correct"] == 2
    assert s["labelled_cheats"]["submitted"] >= 3 and s["labelled_cheats"]["accepted"] == []
    # The passthrough is a hack; the fallback and the half-done kernel return wrong outputs on fresh inputs
    # (incorrect): what matters is that no labelled cheat was accepted.
    assert s["hacks_caught"] >= 1
    relu = next(r for r in first.records if r["task_id"] == "bundled/L1/1_ReLU")
    assert relu["turns"][0]["verdict"] == "ok" and relu["max_turns"] >= 4
    for name in ("run.json", "results.jsonl", "trajectories.jsonl", "report.md", "speedups.png",
                 "summary.json"):
        assert (out / name).is_file(), name
    trajectory = _lines(out / "trajectories.jsonl")
    assert {t["episode_id"] for t in trajectory} == {r["episode_id"] for r in first.records}
    second = run_bench(config, progress=False)
    assert second.ran == 0 and second.skipped == 2 and len(_lines(out / "results.jsonl")) == 2
    with pytest.raises(BenchError, match="different run"):
        run_bench(BenchConfig(policy="replay:cpp", tasks=config.tasks, out=str(out),
                              eval_options=LENIENT_JUDGE),
                  progress=False)


class Interrupting:
    """Replays honest files, but raises once `after` episodes have started (a crash mid-run)."""

    def __init__(self, after: int, exc: BaseException):
        self.inner = make_policy("replay:cpp")
        self.after, self.exc, self.started = after, exc, 0
        self.covers = self.inner.covers
        self.suggested_turns = self.inner.suggested_turns

    def act(self, observation, info):
        if info["attempt"] == 0:
            self.started += 1
            if self.started > self.after:
                raise self.exc
        return self.inner.act(observation, info)


@pytest.mark.slow
def test_resume_after_an_exception_and_an_interrupt(tmp_path):
    out = tmp_path / "run"
    config = BenchConfig(env="KernelGym-L1-v0", policy="replay:cpp", baseline="one_shot", out=str(out),
                         tasks="L1/1_ReLU,L1/7_GELU,L1/2_*,L1/8_*", tensorboard=False,
                         eval_options=LENIENT_JUDGE)
    failing = run_bench(config, policy=Interrupting(2, RuntimeError("endpoint down")), progress=False)
    total = failing.summary["overall"]["tasks"]
    assert total >= 3
    assert len(failing.errors) == total - 2 and failing.summary["overall"]["finished"] == 2
    assert "endpoint down" in (out / "errors.jsonl").read_text()
    assert failing.summary["missing"]  # failed episodes count as missing, not as finished
    with pytest.raises(KeyboardInterrupt):
        run_bench(config, policy=Interrupting(1, KeyboardInterrupt()), progress=False)
    assert len(_lines(out / "results.jsonl")) == 3
    done = run_bench(config, progress=False)
    assert done.ran == total - 3 and done.skipped == 3
    keys = [r["key"] for r in _lines(out / "results.jsonl")]
    assert len(keys) == len(set(keys)) == total


@pytest.mark.slow
def test_resume_after_a_kill(tmp_path):
    """SIGKILL a bench subprocess mid-run, tear its last line, rerun the same command: nothing lost or
    doubled."""
    out = tmp_path / "run"
    relu = Path(__file__).resolve().parents[2] / "kernelgym" / "solutions" / "cpp" / "level1" / "1_ReLU.py"
    command = [sys.executable, "-m", "kernelgym.agents.bench_cli", "--env", "KernelGym-L1-v0",
               "--policy", f"scripted:@{relu}", "--baseline", "one_shot", "--tasks", "L1/1*",
               "--out", str(out), "--no-tensorboard"]
    results = out / "results.jsonl"
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    while not (results.exists() and len(results.read_text().splitlines()) >= 3):
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = _lines(results)
    with open(results, "a") as f:
        f.write('{"task_id": "bundled/L1/19_L2Normalize", "sam')  # a write the kill cut short
    finished = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert finished.returncode == 0, finished.stderr[-2000:]
    after = _lines(results)  # parses: the torn line is gone
    keys = [r["key"] for r in after]
    run = json.loads((out / "run.json").read_text())
    expected = {f"{t['id']}#0" for t in run["tasks_selected"]}
    assert len(keys) == len(set(keys)) and set(keys) == expected and len(expected) > len(before)
    assert after[: len(before)] == before  # the episodes finished before the kill are kept as they were
    assert "kernelgym bench" in finished.stdout and (out / "report.md").is_file()


def test_results_file_repairs_a_torn_tail(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text('{"key": "a#0", "task_id": "a", "sample": 0}\n{"key": "a#0", "task_id": "a", "sample": '
                    '0}\ngarbage line\n{"key": "b#0", "task_')
    store = ResultsFile(path)
    assert store.repaired and path.read_text().endswith("garbage line\n")
    assert [r["key"] for r in store.read()] == ["a#0"]  # duplicates and damaged lines skipped
    store.append({"key": "c#0", "task_id": "c", "sample": 0})
    assert [r["key"] for r in store.read()] == ["a#0", "c#0"]


def test_an_episode_the_judge_failed_is_run_again_and_the_judged_one_kept(tmp_path):
    store = ResultsFile(tmp_path / "results.jsonl")
    failed_judge = {"key": "a#0", "task_id": "a", "sample": 0, "correct": False,
                    "turns": [{"verdict": "infrastructure_error"}]}
    store.append(failed_judge)
    store.append({**failed_judge, "turns": [{"verdict": "incorrect"}]})
    store.append({**failed_judge, "turns": [{"verdict": "ok"}], "correct": True})
    (kept,) = store.read()
    assert kept["turns"] == [{"verdict": "incorrect"}]  # the first judged record, never the unjudged one


def test_cli_command(tmp_path):
    import typer
    from typer.testing import CliRunner

    from kernelgym.agents.bench_cli import bench_command

    app = typer.Typer()
    app.command("bench")(bench_command)
    app.command("other")(lambda: None)
    runner = CliRunner()
    out = tmp_path / "cli"
    result = runner.invoke(app, ["bench", "--env", "KernelGym-L1-v0", "--policy", "scripted:DONE",
                                 "--tasks", "L1/1_ReLU", "--out", str(out), "--no-tensorboard"])
    assert result.exit_code == 0, result.output
    assert "fast_1" in result.output and "report:" in result.output
    record = _lines(out / "results.jsonl")[0]
    assert record["turns"][0]["verdict"] == "done" and not record["correct"]
    bad = runner.invoke(app, ["bench", "--policy", "nope:x", "--out", str(tmp_path / "bad")])
    assert bad.exit_code == 1 and "unknown policy" in bad.output
    empty = runner.invoke(app,
                          ["bench", "--env", "KernelGym-L1-v0", "--policy", "scripted:DONE", "--tasks", "zzz",
                                "--out", str(tmp_path / "none")])
    assert empty.exit_code == 1 and "no task" in empty.output
