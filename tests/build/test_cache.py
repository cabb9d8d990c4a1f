"""The build cache is held to a quota, least recently used entries first, never one in use (a red-team run
filled it 100 MB a build, toward a full disk and `infrastructure_error` for every later evaluation)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from kernelgym.build import cache


def entry(root: Path, kind: str, name: str, size: int, used: float) -> Path:
    folder = root / kind / name
    folder.mkdir(parents=True)
    (folder / "lib.so").write_bytes(b"\0" * size)
    os.utime(folder, (used, used))
    return folder


def test_over_its_quota_the_cache_loses_its_least_recently_used_entries_first(tmp_path):
    now = time.time()
    oldest = entry(tmp_path, "native", "a", 400, now - 7200)
    older = entry(tmp_path, "torch_ext", "b", 400, now - 3600)
    recent = entry(tmp_path, "triton_modules", "c", 400, now - 1800)
    in_use = entry(tmp_path, "native", "d", 400, now - 60)
    (tmp_path / "torch_pch").mkdir()
    header = tmp_path / "torch_pch" / "big.gch"
    header.write_bytes(b"\0" * 4000)  # not an entry: precompiled headers are capped where they are made
    freed = cache.enforce_quota(tmp_path, quota=1000, now=now)
    assert freed == 800 and not oldest.exists() and not older.exists()
    assert recent.exists() and in_use.exists() and header.exists()
    assert cache.enforce_quota(tmp_path, quota=1000, now=now) == 0  # under the quota: nothing more


def test_an_entry_in_use_stays_even_over_the_quota(tmp_path):
    now = time.time()
    just_built = entry(tmp_path, "native", "a", 5000, now - 5)
    assert cache.enforce_quota(tmp_path, quota=1000, now=now) == 0 and just_built.exists()


def test_a_cache_hit_marks_the_entry_used(tmp_path, monkeypatch):
    from kernelgym import kernels
    from kernelgym.build import serve

    monkeypatch.setenv("KERNELGYM_CACHE", str(tmp_path))
    source = 'extern "C" void nothing() {}'
    request = {"language": "cpp", "source": source, "flags": list(kernels.CPP_FLAGS)}
    built, cached = serve.serve(request, 120)
    assert isinstance(built, serve.m.Built) and not cached
    folder = Path(built.path).parent
    os.utime(folder, (1, 1))
    again, cached = serve.serve(request, 120)
    assert cached and again.path == built.path and folder.stat().st_mtime > time.time() - 60


def test_a_native_build_is_cached_per_instruction_set(monkeypatch):
    """C++ is built with -march=native: a library from a host with AVX-512 dies of SIGILL on one without, and
    one from a host without it ran the bundled L3 kernels 20-40x slower on one with it (issue 47). A cache
    shared between hosts must not hand one host's build to the other."""
    from kernelgym import kernels

    request = kernels.BuildRequest("cpp", "extern \"C\" void f() {}", kernels.CPP_FLAGS)
    monkeypatch.setattr(kernels, "cpu_features", lambda: "avx avx2 avx512f fma sse4_2")
    with_avx512 = request.key
    monkeypatch.setattr(kernels, "cpu_features", lambda: "avx avx2 fma sse4_2")
    assert request.key != with_avx512
    monkeypatch.setattr(kernels, "cpu_features", lambda: "avx avx2 avx512f fma sse4_2")
    assert request.key == with_avx512
