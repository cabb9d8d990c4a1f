"""The candidate's cgroup (issue 28): cores it cannot widen, CPU time of its whole tree to the ns, exited
threads included. Real cgroups, as CI has them (root, cgroup v1); the fallback where they cannot be made."""

from __future__ import annotations

import os
import threading
import time

import pytest

from kernelgym.workers import cgroup
from kernelgym.workers.cgroup import CandidateCgroup


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


@pytest.fixture
def made():
    group, why = CandidateCgroup.create({min(os.sched_getaffinity(0))})
    if group is None:
        assert os.geteuid() != 0 or not os.path.isdir("/sys/fs/cgroup/cpuset"), why
        pytest.skip(f"no cgroups here: {why}")
    yield group
    group.remove()


def test_the_tree_is_held_to_its_cores_and_its_exited_threads_are_charged(made):
    core = min(os.sched_getaffinity(0))
    read_end, write_end = os.pipe()
    before = made.cpu_ns()
    pid = os.fork()
    if pid == 0:  # the candidate: joins first, then tries to widen and burns CPU in a thread that exits
        try:
            cgroup.join(made.join_files())
            try:
                os.sched_setaffinity(0, range(os.cpu_count() or 1))
            except OSError:
                pass
            helper = threading.Thread(target=_spin, args=(0.2,))
            helper.start()
            helper.join()
            os.write(write_end, ",".join(map(str, sorted(os.sched_getaffinity(0)))).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    allowed = os.read(read_end, 100).decode()
    os.waitpid(pid, 0)
    assert allowed == str(core), "the cpuset held the widened affinity to the evaluation's core"
    assert made.cpus() == str(core)
    # the helper thread exited (and so did its process): its 0.2 s are still charged
    assert made.cpu_ns() - before >= 0.18e9


def test_no_cgroup_without_root_says_why(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    group, why = CandidateCgroup.create({0})
    assert group is None and "not root" in why


SPINNERS = """
import sys, threading
def spin():
    while True:
        pass
for _ in range(2):
    threading.Thread(target=spin, daemon=True).start()
print("ready", flush=True)
spin()
"""


def test_a_settled_freeze_leaves_nothing_to_charge(made):
    """Issue 43: an honest ReLU was judged extra_cores ("ran 3.9 ms while stopped") because the count was
    read when /proc showed every thread stopped but before the kernel switched each out, which is when it
    charges a thread's last slice. After `settle`, every busy thread is off its run queue: the frozen tree's
    count stays still (it moved in 23 of 1407 reference batches of a soak before, 0 of 1467 after)."""
    import signal
    import subprocess
    import sys

    from kernelgym.workers.process import EvalProcess

    child = subprocess.Popen([sys.executable, "-c", SPINNERS], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        assert cgroup.adopt(made.join_files(), [child.pid])  # every thread of it
        tree = EvalProcess.__new__(EvalProcess)  # only its view of the tree: no evaluation behind it
        tree.frozen, tree.settle_blind = [child.pid], False
        for _ in range(30):
            os.kill(child.pid, signal.SIGSTOP)
            assert tree.settle(2.0)
            settled = made.cpu_ns()
            time.sleep(0.01)
            assert made.cpu_ns() == settled
            os.kill(child.pid, signal.SIGCONT)
            time.sleep(0.005)
    finally:
        child.kill()
        child.wait()
