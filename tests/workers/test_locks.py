"""The timing slot: every process that uses a GPU names the same lock for it."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

import pytest

from kernelgym.workers import locks


@pytest.mark.parametrize(
    ("visible", "expected"),
    [(None, "cuda0.lock"), ("", "cuda0.lock"), ("0", "cuda0.lock"), ("2,3", "cuda2.lock"),
     ("1", "cuda1.lock")],
)
def test_a_gpu_slot_is_named_by_the_first_gpu_the_process_sees(monkeypatch, visible, expected):
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert os.path.basename(locks.lock_path("cuda")) == expected
    assert os.path.basename(locks.lock_path("cpu")) == "cpu.lock"


def test_the_slot_is_held_against_another_process(tmp_path, monkeypatch):
    """A pool's worker (CUDA_VISIBLE_DEVICES=0) holds the slot; a process with the variable unset, as a
    benchmark's probe is, sees it taken."""
    monkeypatch.setattr(locks, "LOCK_DIR", str(tmp_path))
    locks.prepare()
    holder = subprocess.Popen(
        [sys.executable, "-c", (
            "import sys, time; from kernelgym.workers import locks; locks.LOCK_DIR = sys.argv[1]\n"
            "with locks.device_lock('cuda'):\n    print('held', flush=True); time.sleep(30)"), str(tmp_path)],
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "0"}, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        with open(locks.lock_path("cuda"), "a") as handle, pytest.raises(BlockingIOError):
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        holder.kill()
        holder.wait()
