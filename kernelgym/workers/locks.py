"""The timing slot: one evaluation at a time measures on a device, while builds and checks overlap."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time

# One folder for the whole machine (not the per-worker TMPDIR): every worker of every pool shares the slot.
LOCK_DIR = os.environ.get("KERNELGYM_LOCK_DIR", "/tmp/kernelgym-locks")


def prepare() -> None:
    os.makedirs(LOCK_DIR, exist_ok=True)
    with contextlib.suppress(OSError):
        os.chmod(LOCK_DIR, 0o1777)
    for path in (lock_path("cpu"), lock_path("cuda")):
        if not os.path.exists(path):
            with open(path, "a"):
                pass
            with contextlib.suppress(OSError):
                os.chmod(path, 0o666)


def lock_path(device: str) -> str:
    """The slot's file for a device: one per GPU, named by the first GPU this process sees (the one it
    uses), so a pool that spreads its workers by CUDA_VISIBLE_DEVICES and a process that sees the same
    GPU first name the same slot; unset means GPU 0."""
    if not device.startswith("cuda"):
        return os.path.join(LOCK_DIR, "cpu.lock")
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip() or "0"
    return os.path.join(LOCK_DIR, f"cuda{first}.lock")


@contextlib.contextmanager
def device_lock(device: str):
    with open(lock_path(device), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def timing_slot(device: str, stage_s: dict | None = None):
    """A GPU is one shared device: concurrent evaluations would time each other's kernels. On the CPU each
    worker's processes are pinned to cores of their own, so timing runs concurrently there. Seconds spent
    waiting for the slot and holding it go to `stage_s` (the slot's busy share is measured from them)."""
    if device != "cuda":
        yield
        return
    asked = time.monotonic()
    with device_lock(device):
        got = time.monotonic()
        try:
            yield
        finally:
            if stage_s is not None:
                for key, seconds in (("slot_wait", got - asked), ("slot_held", time.monotonic() - got)):
                    stage_s[key] = round(stage_s.get(key, 0.0) + seconds, 3)
