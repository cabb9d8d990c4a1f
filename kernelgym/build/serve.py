"""Builds asked for by a candidate's process, run here in the trusted worker and cached by content.

The candidate never runs a compiler: it sends what to build (lean C++/CUDA, a torch extension, Triton's own
launcher module), this module builds it with kernelgym's flags and answers with the artifact's path.
"""

from __future__ import annotations

import contextlib
import os
import resource
from pathlib import Path

from kernelgym import kernels
from kernelgym.build import cache, flags
from kernelgym.workers import messages as m

# What one compiler process of a build may take: its heap (and private mappings), and any file it writes.
# A source can make the compiler allocate without end (`#include "/dev/zero"` asked for 8, then 16 GiB) and
# builds run in the worker, outside the candidate's sandbox: on a small host that was the OOM killer's call.
BUILD_FILE_BYTES = 2 << 30  # a precompiled header is under 1 GiB, an extension's library far less


def build_data_bytes() -> int:
    return min(16 << 30, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 3)


@contextlib.contextmanager
def build_limits():
    """Lower this process's soft limits for the length of a build, so that every compiler it starts
    inherits them (torch's and Triton's builds start their own), then put them back."""
    caps = {resource.RLIMIT_DATA: build_data_bytes(), resource.RLIMIT_FSIZE: BUILD_FILE_BYTES}
    saved = {which: resource.getrlimit(which) for which in caps}
    try:
        for which, cap in caps.items():
            soft, hard = saved[which]
            if hard != resource.RLIM_INFINITY:
                cap = min(cap, hard)
            if soft == resource.RLIM_INFINITY or soft > cap:
                resource.setrlimit(which, (cap, hard))
        yield
    finally:
        for which, limits in saved.items():
            resource.setrlimit(which, limits)


def serve(request: dict, timeout_s: float) -> tuple[m.Message, bool]:
    """(Built | BuildFailed, whether it came from the cache)."""
    with build_limits():
        reply, cached = _serve(request, timeout_s)
    if isinstance(reply, m.Built):
        artifact = Path(reply.path)
        entry = next((p for p in (artifact, *artifact.parents) if p.parent.name in cache.ENTRY_FOLDERS), None)
        if entry is not None:
            cache.touch(entry)
        if not cached:  # the cache grew: back under its quota, least recently used first
            cache.enforce_quota(kernels.cache_root())
    return reply, cached


def _serve(request: dict, timeout_s: float) -> tuple[m.Message, bool]:
    language = str(request.get("language"))
    try:
        if language == "torch_ext":
            return _extension(request)
        if language == "triton_module":
            from kernelgym.build import triton_build

            return m.Built(str(triton_build.build(triton_build.ModuleRequest.from_meta(request)))), True
        build = kernels.BuildRequest(language, str(request.get("source")),
                                     flags.words(str(f) for f in request.get("flags", [])))
        if language not in flags.ACCEPTED:
            return m.BuildFailed(f"unsupported build request: language {language!r}"), True
        refused = flags.refused_for(build.flags, language)  # kernelgym's own flags are among them
        if refused:
            return m.BuildFailed(flags.why_refused(refused)), True
        existed = kernels.library_path(build).exists()
        return m.Built(str(kernels.compile_request(build, timeout_s=timeout_s))), existed
    except kernels.BuildError as exc:
        return m.BuildFailed(str(exc), exc.log), False
    except (KeyError, TypeError, ValueError) as exc:
        return m.BuildFailed(f"malformed build request: {exc}"), True


def _extension(request: dict) -> tuple[m.Message, bool]:
    from kernelgym.build import torch_ext

    ext = torch_ext.ExtensionRequest.from_meta(request)
    existed = torch_ext.is_built(ext)
    return m.Built(str(torch_ext.build(ext))), existed
