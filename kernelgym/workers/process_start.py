"""The life of a forked evaluation process, on its own side of the fork: it joins its cgroup, keeps only its
socket and log, takes its cores and malloc policy, enters its sandbox (the candidate under a PID namespace's
first process, or a keeper that adopts its orphans), says Hello, waits for its job if it is a spare, runs
it, and ends the way the candidate ended so that the worker reads the real cause."""

from __future__ import annotations

import os
import signal
import struct
import warnings

from kernelgym.workers import messages as m
from kernelgym.workers.candidate_side import run_candidate
from kernelgym.workers.child import M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, ChildJob, mallopt
from kernelgym.workers.procfs import children_of, line_value, send_signal
from kernelgym.workers.sandbox import enter, enter_namespaces, no_inspection


def child_main(target, job, sock, eval_dir, log_fd, sandbox, uses_gpu, cores, candidate,
                cgroup_files=None) -> None:
    code = 0
    try:
        _die_with_parent()
        if cgroup_files:  # first: every thread and process the candidate makes is born inside its cgroup
            from kernelgym.workers import cgroup

            try:
                cgroup.join(cgroup_files)
            except OSError:  # the worker finds the cgroup empty and falls back, saying so
                pass
        _keep_only_fds(sock.fileno(), log_fd)
        if cores:  # the candidate gets exactly the reference's cores: extra threads only share them
            os.sched_setaffinity(0, cores)
        _steady_allocator()
        notes: list[str] = []
        pid_ns = False
        if candidate:
            notes, pid_ns = enter_namespaces(sandbox, uses_gpu)
            if pid_ns:
                _become_namespace_init()
            else:
                _become_keeper()
        pid = _global_pid()  # before /proc is remounted for a PID namespace
        notes += enter(eval_dir, log_fd, sandbox, uses_gpu, candidate=candidate, own_pids=pid_ns)
        if uses_gpu:
            quiet_sandbox_warnings()
        m.send(sock, m.Hello(notes, pid=pid))
        if job is None:
            job = _await_job(sock, uses_gpu)
        if candidate:
            run_candidate(job, sock, eval_dir)
        else:
            target(job, sock)
    except BaseException:  # noqa: BLE001 - any end of the evaluation process is an exit status
        code = 70
    finally:
        os._exit(code)


def _await_job(sock, uses_gpu: bool) -> ChildJob:
    """A spare's wait: the CUDA context (and cuBLAS's handle) first, the part of a GPU process's start that
    costs about half a second, then the job. Nothing of the solution's has run in this process yet."""
    import pickle

    if uses_gpu:
        import torch

        torch.empty(1, device="cuda")
        torch.cuda.current_blas_handle()
    msg, blobs, _ = m.receive(sock)
    if not isinstance(msg, m.Job) or len(blobs) != 1:
        raise SystemExit(70)
    return pickle.loads(bytes(blobs[0]))


def quiet_sandbox_warnings() -> None:
    """NVML does not start inside the sandbox's namespaces on some hosts, and torch warns about it at every
    device count: the sandbox's doing, not the solution's, so it stays out of the output shown as feedback.
    (torch then counts devices through the CUDA runtime, which works.)"""
    warnings.filterwarnings("ignore", message="Can't initialize NVML")


def _die_with_parent() -> None:
    """SIGKILL from the kernel when the parent dies: an evaluation frozen when its worker was killed would
    otherwise stay stopped for good (seen after a fault-injection soak: 15 stopped processes, 240 MB each)."""
    import ctypes

    parent = os.getppid()
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent was already gone
        os._exit(70)


def _keep_only_fds(*keep: int) -> None:
    """Close every descriptor inherited from the worker but these (and stdio): the fork copied the worker's
    ends of the other process's socket, its pool connection and its readback buffer, none of which an
    evaluation process may hold (close-on-exec does nothing at a fork)."""
    last = 2
    for fd in sorted(set(keep)):
        os.closerange(last + 1, fd)
        last = fd
    os.closerange(last + 1, os.sysconf("SC_OPEN_MAX"))


def _steady_allocator() -> None:
    """The same malloc policy on both sides, fixed: freed memory stays in the heap for the next batch's
    outputs. glibc's default moves its mmap threshold as the process frees, so whether a call's output lands
    on fresh pages (and pays their faults, as much as a memory-bound kernel's own time) depended on each
    process's history: the bundled ReLU measured 0.45x-1.33x over 8 evaluations before, 0.86x-0.92x over 6
    after."""
    mallopt((M_MMAP_THRESHOLD, 32 << 20),  # glibc's maximum, and no longer adjusted
            (M_TRIM_THRESHOLD, 1 << 30))  # keep freed heap memory


def _become_namespace_init() -> None:
    """After unshare(CLONE_NEWPID): fork the namespace's first process, which forks the candidate (pid 2
    there) and reaps orphans; this process waits for it and passes on how the candidate ended. When the first
    process dies, the kernel kills everything else in the namespace.

    The candidate is not the namespace's first process itself: that one is immune to the signals it sends
    itself without a handler (raise, abort), so a candidate there could not end the way an ordinary process
    does. Both helpers are undumpable and never run candidate code."""
    read_end, write_end = os.pipe()
    first = os.fork()
    if first == 0:  # pid 1 of the namespace
        _die_with_parent()  # its end ends the namespace: nothing frozen in it outlives a killed worker
        os.close(read_end)
        no_inspection()
        candidate = os.fork()
        if candidate == 0:
            os.close(write_end)
            return
        _close_all_but(write_end)
        os.write(write_end, struct.pack("i", _reap_until(candidate)))
        os._exit(0)
    os.close(write_end)
    no_inspection()
    _close_all_but(read_end)  # keep no socket open: the trusted side must see the evaluation's end
    _, status = os.waitpid(first, 0)
    told = os.read(read_end, 4)
    _end_like(struct.unpack("i", told)[0] if len(told) == 4 else status)


def _become_keeper() -> None:
    """Without a PID namespace (a GPU, a user without root): make this process a child subreaper and fork
    the candidate from it. A process the candidate orphans (a double fork, a daemon) is then adopted here,
    inside the evaluation's tree, instead of by init outside it: frozen with the candidate, its CPU time
    counted, killed at the end. Measured before this: such a daemon spun on the reference's core whenever
    the candidate was frozen (the reference timed at 1.62 ms a call against 0.58-0.61 ms) and outlived the
    evaluation.

    The candidate cannot undo it (the flag belongs to this process, which never runs candidate code); it
    could still leave the tree another way as root in the worker's PID namespace (documented)."""
    import ctypes

    ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    candidate = os.fork()
    if candidate == 0:
        _die_with_parent()
        return
    no_inspection()
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # no socket kept: the trusted side must see the end
    status = _reap_until(candidate)
    _kill_adopted()
    _end_like(status)


PR_SET_CHILD_SUBREAPER = 36


def _kill_adopted() -> None:
    """Kill and reap every child left (what the candidate orphaned), until none is: exiting with them alive
    would hand them to init, out of the trusted side's reach."""
    while True:
        for pid in children_of(os.getpid()):
            send_signal(pid, signal.SIGKILL)
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _close_all_but(fd: int) -> None:
    os.closerange(3, fd)
    os.closerange(fd + 1, os.sysconf("SC_OPEN_MAX"))


def _reap_until(pid: int) -> int:
    """Wait for every child (orphans are adopted here) until `pid` ends; its wait status."""
    while True:
        try:
            ended, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 0
        if ended == pid:
            return status


def _end_like(status: int) -> None:
    """End this process the way the candidate ended, so the worker reads the real cause (SIGSEGV...)."""
    if os.WIFSIGNALED(status):
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


def _global_pid() -> int:
    """This process's pid as the worker sees it (the first NSpid entry, read before /proc is remounted)."""
    first = line_value("/proc/self/status", "NSpid:")
    return int(first) if first is not None else os.getpid()

