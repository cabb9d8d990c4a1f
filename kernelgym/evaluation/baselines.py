"""Reference baselines (torch.compile times) cached per task and per hardware/software fingerprint."""

from __future__ import annotations

import json
import os
import platform
import tempfile
import threading
from pathlib import Path


def fingerprint(device: str, threads: int) -> str:
    """What a timing depends on besides the task: the device, torch and Triton versions, thread count."""
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except Exception:  # noqa: BLE001 - a broken Triton install is no Triton here
        triton_version = "none"
    name = platform.processor() or platform.machine()
    if device.startswith("cuda"):
        name = os.environ.get("KERNELGYM_GPU_NAME", "cuda")  # set by the worker; CUDA is not initialized here
    return f"{name}|torch {torch.__version__}|triton {triton_version}|{threads}t"


class JsonCache:
    """A small JSON file of measurements, rewritten atomically; readers never see a half-written one."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()

    def _read(self) -> dict:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}

    def get_raw(self, key: str):
        return self._read().get(key)

    def put_raw(self, key: str, value) -> None:
        with self._lock:
            data = self._read()
            data[key] = value
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.stem}-")
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=1, sort_keys=True)
            os.chmod(tmp, 0o644)
            os.replace(tmp, self.path)


class BaselineCache(JsonCache):
    """Reference times in ms per task and fingerprint."""

    def get(self, key: str) -> float | None:
        value = self.get_raw(key)
        return float(value) if isinstance(value, int | float) else None

    def put(self, key: str, ms: float) -> None:
        self.put_raw(key, ms)
