"""The build cache's size. A candidate chooses what it builds, and a library can carry any amount of data (a
red-team run added 100 MB a build), so the cache is held to a quota: once past it, the entries least
recently used are removed until it is back under 80% of it.

An entry is one build's folder (`native/KEY`, `torch_ext/KEY`, `triton_modules/KEY`, `triton_kernels/KEY`);
every use touches it. Entries used in the last ten minutes stay whatever the size, so a build that was just
handed to an evaluation is never taken from under it (a library already loaded is safe anyway: Linux keeps a
removed file while it is mapped). Precompiled headers are not entries here: their number is capped where they
are made.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

ENTRY_FOLDERS = ("native", "torch_ext", "triton_modules", "triton_kernels")
RECENT_S = 600.0
QUOTA_ENV = "KERNELGYM_CACHE_QUOTA_GB"


def quota_bytes(root: Path) -> int:
    """KERNELGYM_CACHE_QUOTA_GB, else a quarter of the cache's disk, at most 20 GiB."""
    configured = os.environ.get(QUOTA_ENV)
    if configured:
        return int(float(configured) * (1 << 30))
    try:
        disk = shutil.disk_usage(root).total
    except OSError:
        disk = 80 << 30
    return min(20 << 30, disk // 4)


def touch(path: Path) -> bool:
    """Mark a build's entry as used now; False when it is gone."""
    try:
        os.utime(path)
        return True
    except OSError:
        return False


def _size(folder: Path) -> int:
    total = 0
    for base, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(base, name)).st_size
            except OSError:
                pass
    return total


def entries(root: Path) -> list[tuple[float, int, Path]]:
    """(last use, bytes, folder) of every entry."""
    found = []
    for kind in ENTRY_FOLDERS:
        try:
            folders = [p for p in (root / kind).iterdir() if p.is_dir() and not p.name.startswith(".")]
        except OSError:
            continue
        for folder in folders:
            try:
                found.append((folder.stat().st_mtime, _size(folder), folder))
            except OSError:
                pass
    return found


def enforce_quota(root: Path, quota: int | None = None, now: float | None = None) -> int:
    """Remove the least recently used entries while the cache is over its quota; the bytes freed."""
    quota = quota_bytes(root) if quota is None else quota
    found = entries(root)
    total = sum(size for _, size, _ in found)
    if total <= quota:
        return 0
    now = time.time() if now is None else now
    freed = 0
    for used, size, folder in sorted(found):
        if total - freed <= 0.8 * quota:
            break
        if now - used < RECENT_S:
            break  # everything from here on is in use
        shutil.rmtree(folder, ignore_errors=True)
        freed += size
    return freed
