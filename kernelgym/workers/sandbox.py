"""What a freshly forked evaluation process does to itself before any task or candidate code runs."""

from __future__ import annotations

import ctypes
import os
import resource
import tempfile
from dataclasses import dataclass

CLONE_NEWNET = 0x40000000
PR_SET_DUMPABLE = 4
NOBODY_UID = 65534


@dataclass
class SandboxConfig:
    memory_limit_mb: int | None = 16384  # address-space limit (skipped for GPU processes: CUDA maps huge ranges)
    file_size_limit_mb: int = 512  # largest file the candidate may write (bounds its printed output too)
    drop_privileges: bool = True  # when running as root: become `nobody`, so the cache and other runs are read-only
    isolate_network: bool = True  # a network namespace of its own, where the OS allows it
    threads: int = 1  # fixed thread count for CPU timing (torch and OpenMP)


def enter(eval_dir: str, output_fd: int, config: SandboxConfig, uses_gpu: bool) -> list[str]:
    """Apply the sandbox; returns notes on what could not be applied (they go into the result's warnings)."""
    notes: list[str] = []
    if os.getsid(0) != os.getpid():
        os.setsid()  # own process group: a timeout kills everything the candidate started
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    os.chdir(eval_dir)
    tempfile.tempdir = eval_dir  # the worker's own temp folder was cached by tempfile before the fork
    os.environ.update(HOME=eval_dir, TMPDIR=eval_dir, TRITON_HOME=eval_dir, TRITON_CACHE_DIR=os.path.join(eval_dir, "triton"),
                      TORCH_EXTENSIONS_DIR=os.path.join(eval_dir, "torch_extensions"),
                      OMP_NUM_THREADS=str(config.threads))
    if config.isolate_network:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(CLONE_NEWNET) != 0:
            notes.append("network isolation unavailable (unshare failed: not root?)")
    if config.memory_limit_mb and not uses_gpu:
        limit = config.memory_limit_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    size = config.file_size_limit_mb << 20
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if config.drop_privileges and os.geteuid() == 0 and not _world_readable_install():
        notes.append("privileges not dropped: the Python install is not readable by an unprivileged user")
    elif config.drop_privileges and os.geteuid() == 0:
        os.chown(eval_dir, NOBODY_UID, NOBODY_UID)
        for root, dirs, files in os.walk(eval_dir):
            for name in dirs + files:
                os.chown(os.path.join(root, name), NOBODY_UID, NOBODY_UID)
        os.setgroups([])
        os.setgid(NOBODY_UID)
        os.setuid(NOBODY_UID)
    elif config.drop_privileges:
        notes.append("privileges not dropped (not root): the candidate runs as the caller's user")
    no_inspection()
    return notes


def no_inspection() -> None:
    """Make this process's memory unreadable through /proc/PID/mem by other unprivileged processes."""
    try:
        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _world_readable_install() -> bool:
    """`nobody` must be able to reach Python, torch and kernelgym, or every later import would fail."""
    import sys

    import torch

    import kernelgym

    for path in {os.path.realpath(sys.executable), sys.prefix, os.path.dirname(torch.__file__),
                 os.path.dirname(kernelgym.__file__), os.path.realpath(sys.base_prefix)}:
        parts = os.path.abspath(path).split(os.sep)
        for i in range(2, len(parts) + 1):
            here = os.sep.join(parts[:i]) or os.sep
            try:
                if not os.stat(here).st_mode & 0o005:
                    return False
            except OSError:
                return False
    return True
