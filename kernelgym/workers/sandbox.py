"""What a freshly forked evaluation process does to itself before any task or candidate code runs."""

from __future__ import annotations

import ctypes
import os
import resource
import tempfile
from dataclasses import dataclass

CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    1, 2, 4, 8, 32, 4096, 16384, 1 << 18)
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_SET_SECUREBITS = 4, 24, 38, 28
SECURE_ALL_BITS_LOCKED = 0x2F  # NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED..., each with its lock
_libc = ctypes.CDLL(None, use_errno=True)
CGROUPS = "/sys/fs/cgroup"
_own_mount_namespace = False  # set once this process has unshared its mounts: only then may it remount


@dataclass
class SandboxConfig:
    # address-space limit (skipped for GPU processes: CUDA maps huge ranges)
    memory_limit_mb: int | None = 16384
    # one limit for the candidate's whole tree where a memory cgroup can be made (CPU evaluations as root);
    # None: memory_limit_mb, at most half the host's memory
    tree_memory_limit_mb: int | None = None
    file_size_limit_mb: int = 512  # largest file the candidate may write (bounds its printed output too)
    drop_privileges: bool = True  # as root: no capabilities, a read-only view of the filesystem (see isolate)
    isolate_network: bool = True  # a network namespace of its own, where the OS allows it
    pid_namespace: bool | None = None  # its own PID namespace (as root): None = on the CPU, off on a GPU
    threads: int = 1  # fixed thread count for CPU timing (torch and OpenMP)


def enter(eval_dir: str, output_fd: int, config: SandboxConfig, uses_gpu: bool,
          candidate: bool = True, own_pids: bool = False) -> list[str]:
    """Apply the sandbox; returns notes on what could not be applied (they go into the result's warnings).

    A trusted process (the reference's) is made undumpable, so a candidate cannot read it. The candidate stays
    dumpable, because the worker reads its outputs from its memory; as root it loses every capability and sees
    the filesystem read-only (namespaces are entered before, by `enter_namespaces`)."""
    notes: list[str] = []
    if os.getsid(0) != os.getpid():
        os.setsid()  # own process group: a timeout kills everything the candidate started
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    os.chdir(eval_dir)
    tempfile.tempdir = eval_dir  # the worker's own temp folder was cached by tempfile before the fork
    os.environ.update(HOME=eval_dir, TMPDIR=eval_dir, TRITON_HOME=eval_dir,
                      TRITON_CACHE_DIR=os.path.join(eval_dir, "triton"),
                      TORCH_EXTENSIONS_DIR=os.path.join(eval_dir, "torch_extensions"),
                      OMP_NUM_THREADS=str(config.threads))
    if config.memory_limit_mb and not uses_gpu:
        limit = config.memory_limit_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    size = config.file_size_limit_mb << 20
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if not candidate:
        no_inspection()
        return notes
    if os.geteuid() == 0 and config.drop_privileges:
        notes += _read_only_world(eval_dir, private_shm=not uses_gpu, own_pids=own_pids)
        drop_capabilities()
    elif config.drop_privileges:
        notes.append("not root: the candidate runs as the caller's user (its files are reachable; trusted "
                     "processes are still unreadable: they are not dumpable)")
    if not uses_gpu:
        notes += keep_written_pages()
    return notes


# seccomp: the syscalls that could drop a written page of the input arena, by architecture
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_NR = {"x86_64": {"madvise": 28, "mremap": 25, "process_madvise": 440},
       "aarch64": {"madvise": 233, "mremap": 216, "process_madvise": 440}}
DROPPING_ADVICE = (4, 24, 102)  # MADV_DONTNEED, MADV_DONTNEED_LOCKED, MADV_GUARD_INSTALL (zaps the range)
MREMAP_DONTUNMAP = 4
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2


def keep_written_pages() -> list[str]:
    """CPU candidates: a page of the input arena the candidate wrote stays its private copy, where the
    worker's read of its page tables finds it (outputs.py). The calls that would drop such a copy, so that
    the page maps the file's original again (madvise's DONTNEED kinds, mremap's DONTUNMAP, process_madvise on
    itself), fail with EPERM: a kernel filter set before any candidate code, which nothing in its tree can
    lift. Seen before it: ReLU in place in the input, then MADV_DONTNEED, judged ok. glibc's own such calls
    only hand memory back early and it goes on when they fail. (io_uring's IORING_OP_MADVISE is no syscall:
    the filter does not see it.)"""
    import platform

    machine = platform.machine()
    if machine not in _NR:
        return [f"input pages may be dropped unseen on {machine} (no seccomp filter for it)"]
    nr = _NR[machine]
    ld, jeq, jset, ja, ret = 0x20, 0x15, 0x45, 0x05, 0x06  # BPF_LD|W|ABS, JMP|JEQ|K, JMP|JSET|K, JA, RET|K

    def arg(i: int) -> int:  # where seccomp_data.args[i]'s low word is (little-endian)
        return 16 + 8 * i

    # (code, label if true, label if false, k); a jump names the label it goes to
    program = [(ld, None, None, 4), (jeq, None, "allow", _AUDIT_ARCH[machine]), (ld, None, None, 0),
               (jeq, "madvise", None, nr["madvise"]), (jeq, "process_madvise", None, nr["process_madvise"]),
               (jeq, "mremap", "allow", nr["mremap"]),
               "madvise", (ld, None, None, arg(2)), (ja, None, None, "advice"),
               "process_madvise", (ld, None, None, arg(3)),
               "advice", *[(jeq, "deny", None, advice) for advice in DROPPING_ADVICE],
               (ja, None, None, "allow"),
               "mremap", (ld, None, None, arg(3)), (jset, "deny", "allow", MREMAP_DONTUNMAP),
               "allow", (ret, None, None, 0x7FFF0000),  # SECCOMP_RET_ALLOW
               "deny", (ret, None, None, 0x00050000 | 1)]  # SECCOMP_RET_ERRNO | EPERM
    at, index = {}, 0
    for item in program:
        if isinstance(item, str):
            at[item] = index
        else:
            index += 1
    code = [item for item in program if not isinstance(item, str)]

    def skip(pc: int, label) -> int:
        return 0 if label is None else at[label] - pc - 1

    class Filter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                    ("k", ctypes.c_uint32)]

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Filter))]

    filters = (Filter * len(code))(*[
        Filter(op, skip(pc, yes), skip(pc, no), skip(pc, k) if op == ja else k)
        for pc, (op, yes, no, k) in enumerate(code)])
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # (set already where privileges were dropped)
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(Program(len(code), filters)), 0, 0):
        return [f"input pages may be dropped unseen (seccomp refused, errno {ctypes.get_errno()})"]
    return []


def enter_namespaces(config: SandboxConfig, uses_gpu: bool) -> tuple[list[str], bool]:
    """Unshare what the candidate must not share; returns notes and whether a PID namespace was made (the
    caller then forks once more: the child is the namespace's first process)."""
    notes: list[str] = []
    flags = CLONE_NEWNET if config.isolate_network else 0
    root = os.geteuid() == 0 and config.drop_privileges
    pid_ns = root and (config.pid_namespace if config.pid_namespace is not None else not uses_gpu)
    if root:
        flags |= CLONE_NEWNS | (CLONE_NEWPID if pid_ns else 0)
    if flags and _libc.unshare(flags) != 0:
        notes.append(f"namespaces unavailable (unshare failed, errno {ctypes.get_errno()})")
        return notes, False
    global _own_mount_namespace
    _own_mount_namespace = bool(flags & CLONE_NEWNS)
    return notes, bool(pid_ns)


def _read_only_world(eval_dir: str, private_shm: bool, own_pids: bool) -> list[str]:
    """A private mount table: every mount read-only except the evaluation's folder and (off the GPU, where
    CUDA IPC needs the shared one) a private /dev/shm; a /proc of its own PID namespace when it has one."""
    notes: list[str] = []
    if not _own_mount_namespace:  # never touch the machine's own mount table
        return ["read-only filesystem unavailable (no mount namespace of its own)"]
    if _libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return [f"read-only filesystem unavailable (errno {ctypes.get_errno()})"]
    _libc.mount(eval_dir.encode(), eval_dir.encode(), None, MS_BIND | MS_REC, None)
    for target in ("/dev/shm",) if private_shm else ():  # (/tmp stays, read-only: TMPDIR is its own folder)
        if os.path.isdir(target):
            _libc.mount(b"tmpfs", target.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"size=64m")
    if own_pids:  # in a PID namespace of its own: a /proc that shows only that namespace
        _libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    failed = 0
    for mount_point in _mount_points():
        # /sys stays as it is but for the cgroup hierarchies: read-only, so the candidate (uid 0 without
        # capabilities still owns their files) can neither widen its cpuset nor leave its cgroup.
        if mount_point == eval_dir or mount_point == "/dev/shm" or \
                (mount_point.startswith(("/proc", "/sys", "/dev")) and not mount_point.startswith(CGROUPS)):
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY | _mount_flags(mount_point)
        if _libc.mount(None, mount_point.encode(), None, flags, None) != 0:
            failed += 1
    if failed:
        notes.append(f"{failed} mount(s) could not be made read-only")
    return notes


def _mount_points() -> list[str]:
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].encode().decode("unicode_escape")
            points.append(point)
    return points


def _mount_flags(point: str) -> int:
    """The per-mount flags a bind remount must keep (the kernel refuses to drop a locked one)."""
    try:
        st = os.statvfs(point)
    except OSError:
        return 0
    keep = 0
    for bit, flag in ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC)):
        if st.f_flag & bit:
            keep |= flag
    return keep


def drop_capabilities() -> None:
    """Root without any capability, for good: it cannot ptrace, remount, or regain privileges by exec."""
    _libc.prctl(PR_SET_SECUREBITS, SECURE_ALL_BITS_LOCKED, 0, 0, 0)
    for cap in range(64):
        _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable (x2 words): all empty
    _libc.capset(header, data)
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def no_inspection() -> None:
    """Make this process's memory unreadable through /proc/PID/mem by other unprivileged processes."""
    try:
        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass
