"""benchmarks/gpu/gpu_train.sh's `launch` and `watch`: a run that outlives the device call which started it,
watched by later calls, with a state snapshot that each call's `collect` returns.

davinci_run itself is replaced by a stand-in that writes one metrics line a step (the script's plumbing is
under test here; the run is tested in tests/agents)."""

import hashlib
import json
import os
import subprocess
import tarfile
import time
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "gpu" / "gpu_train.sh"

STAND_IN = '''
import argparse, json, pathlib, sys, time
parser = argparse.ArgumentParser()
parser.add_argument("--out")
parser.add_argument("--rl-stop-at", type=float)
parser.add_argument("--rl-steps", type=int)
args, _ = parser.parse_known_args()
out = pathlib.Path(args.out); (out / "rl").mkdir(parents=True, exist_ok=True)
(out / "results.json").write_text(json.dumps({"stop_at": args.rl_stop_at}))
for step in range(1, args.rl_steps + 1):
    time.sleep(STEP_S)
    metrics = {"step": step, "rollouts": 256, "compile_rate": 0.5, "correct_rate": 0.25, "fast_1": 0.0,
               "time/generate_s": 1.0, "time/rollouts_s": 2.0, "time/update_s": 1.0,
               "skills_admitted_total": step}
    with open(out / "rl" / "metrics.jsonl", "a") as f:
        f.write(json.dumps(metrics) + "\\n")
sys.exit(EXIT)
'''


def _call(tmp_path: Path, steps: str, call_s: int, **env) -> subprocess.CompletedProcess:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    for stale in out.iterdir():  # the device empties $OUT before each call
        stale.unlink()
    env = {**os.environ, "OUT": str(out), "RUN": str(tmp_path / "run"), "CALL_S": str(call_s),
           "BACKEND": "cpp", "GEN_CACHE": "dynamic", "STEPS_RL": "3", **env}
    return subprocess.run(["bash", str(SCRIPT), *steps.split()], cwd=SCRIPT.parents[2], capture_output=True,
                          text=True, timeout=120, env=env, check=False)


def _stand_in(tmp_path: Path, step_s: float, exit_code: int = 0) -> str:
    path = tmp_path / "stand_in.py"
    path.write_text(STAND_IN.replace("STEP_S", str(step_s)).replace("EXIT", str(exit_code)))
    return str(path)


def _snapshot(out: Path) -> dict:
    """The state `collect` packed, checked against its sha256 file as `restore` checks it."""
    for line in (out / "state.sha256").read_text().splitlines():
        digest, name = line.split()
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest
    packed = out / "state.tgz"
    packed.write_bytes(b"".join(p.read_bytes() for p in sorted(out.glob("state.tgz.part-*"))))
    with tarfile.open(packed) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_a_launched_run_outlives_its_call_and_a_later_watch_sees_it_end(tmp_path):
    deadline = int(time.time()) + 600
    first = _call(tmp_path, "launch watch collect", call_s=4, COLLECT_S="1", DEADLINE=str(deadline),
                  DAVINCI=_stand_in(tmp_path, step_s=2.0))
    assert first.returncode == 0, first.stderr
    # the call ended first; the run was not killed with it
    assert "run still going (snapshot)" in first.stdout
    assert not (tmp_path / "run" / "run.rc").exists()
    # the run was told the lease's deadline, not this call's end
    assert json.loads(_snapshot(tmp_path / "out")["results.json"])["stop_at"] == deadline

    second = _call(tmp_path, "watch collect", call_s=60, COLLECT_S="1")
    assert second.returncode == 0, second.stderr
    assert "run exited rc=0" in second.stdout
    steps = [line for line in second.stdout.splitlines() if " step " in line]
    assert [line.split(" step ")[1].split()[0] for line in steps][-1] == "3"  # each finished step is reported
    snapshot = _snapshot(tmp_path / "out")
    assert len(snapshot["rl/metrics.jsonl"].decode().splitlines()) == 3


def test_a_run_that_fails_is_reported_at_once_with_its_exit_status(tmp_path):
    started = time.monotonic()
    result = _call(tmp_path, "launch watch", call_s=60, DAVINCI=_stand_in(tmp_path, step_s=0.1, exit_code=3))
    assert "run exited rc=3" in result.stdout
    assert time.monotonic() - started < 30  # watch did not sit out the call's 60 s
