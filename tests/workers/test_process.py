"""The evaluation process as the judge sees it from outside (/proc)."""

import os
import signal
import subprocess
import sys
import time

from kernelgym.workers.procfs import dead_or_dying

# Touches 1 GiB, says so, then waits: tearing that memory down takes the kernel long enough (tens of ms) for a
# reader to find the process still there but without its memory map.
BIG = """
b = bytearray(1 << 30)
for i in range(0, len(b), 4096):
    b[i] = 1
print("ready", flush=True)
import time
time.sleep(60)
"""


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_a_killed_process_is_dying_from_the_moment_it_is_killed():
    """The soak found honest solutions judged `hack` when a candidate was killed while frozen: its map was
    already gone (no input arena, unreadable outputs) while /proc still showed it running."""
    child = subprocess.Popen([sys.executable, "-c", BIG], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        os.kill(child.pid, signal.SIGSTOP)  # frozen, as the judge reads a candidate
        deadline = time.monotonic() + 5
        while _state(child.pid) != "T":
            assert time.monotonic() < deadline
        assert not dead_or_dying(child.pid)
        os.kill(child.pid, signal.SIGKILL)
        samples, mapless_but_there = 0, 0
        while child.poll() is None:
            try:
                with open(f"/proc/{child.pid}/maps") as f:
                    mapless_but_there += f.read() == ""
            except OSError:
                pass
            assert dead_or_dying(child.pid), f"alive after SIGKILL ({samples} samples)"
            samples += 1
        assert dead_or_dying(child.pid)  # reaped: gone
        print(f"{samples} samples, {mapless_but_there} with no memory map")
    finally:
        child.kill()
        child.wait()


def test_a_stopped_or_running_process_is_alive():
    child = subprocess.Popen(["sleep", "30"])
    try:
        time.sleep(0.05)
        assert not dead_or_dying(child.pid)
        os.kill(child.pid, signal.SIGSTOP)
        assert not dead_or_dying(child.pid)
        os.kill(child.pid, signal.SIGCONT)
        assert not dead_or_dying(child.pid)
    finally:
        child.kill()
        child.wait()


def test_the_sandboxs_nvml_warning_stays_out_of_the_feedback():
    import warnings

    from kernelgym.workers.process_start import quiet_sandbox_warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        quiet_sandbox_warnings()
        warnings.warn("Can't initialize NVML", UserWarning, stacklevel=1)
        warnings.warn("a warning of the solution's own", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["a warning of the solution's own"]
