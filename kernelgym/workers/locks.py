"""The timing slot: one evaluation at a time measures on a device, while builds and checks overlap."""

from __future__ import annotations

import contextlib
import fcntl
import os

# One folder for the whole machine (not the per-worker TMPDIR): every worker of every pool shares the slot.
LOCK_DIR = os.environ.get("KERNELGYM_LOCK_DIR", "/tmp/kernelgym-locks")


def prepare() -> None:
    os.makedirs(LOCK_DIR, exist_ok=True)
    with contextlib.suppress(OSError):
        os.chmod(LOCK_DIR, 0o1777)
    for name in ("cpu", "cuda"):
        path = os.path.join(LOCK_DIR, f"{name}.lock")
        if not os.path.exists(path):
            with open(path, "a"):
                pass
            with contextlib.suppress(OSError):
                os.chmod(path, 0o666)


@contextlib.contextmanager
def device_lock(device: str):
    # one slot per GPU: a pool spreads its workers over the GPUs by CUDA_VISIBLE_DEVICES
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").replace(",", "_")
    name = f"cuda{visible}" if device.startswith("cuda") else "cpu"
    path = os.path.join(LOCK_DIR, f"{name}.lock")
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
