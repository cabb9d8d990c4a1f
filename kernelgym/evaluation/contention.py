"""How long the judged side waited for its cores while its batches were clocked (CPU timing).

Reference and candidate are timed on the same cores, one after the other, so a steady load would slow both
alike; but a load that comes and goes (a training step, another evaluation's build, a test suite) falls on
some batches and not others, and under a busy loop on the timing core the scheduler's wake-up placement gave
one side far more of the core than the other (L3/1_MLP: 1.1x idle, 2.3x beside a burner). A speedup
measured through it is noise the reward would pay.

The kernel records, per thread, the time it spent runnable but waiting for a CPU (/proc/TID/schedstat's
run_delay, in ns): while a side's batch is clocked, that is the time other processes held its cores. It is
read from outside, for the reference's threads and the candidate's. A candidate's exited threads take their
waits with them, but hiding its own side's waits gains it nothing: waiting only slows the candidate, and the
reference's waits, which would flatter it, are read from the trusted reference. (The cores' busy time in
/proc/stat, less the side's own CPU time, says the same, but in 10 ms ticks: beside a burner, a short L1
timing's 0.14 s of clocked batches per side could not tell 30 % from none.)
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass


@dataclass
class SideContention:
    """One side's clocked windows, and how long its threads waited for a CPU in them (summed over threads:
    over `cores` cores, two threads waiting alike wait twice the time)."""

    cores: int = 1
    window_s: float = 0.0
    waited_s: float = 0.0
    windows: int = 0

    def watch(self, pids):
        """A context for one clocked window of the processes `pids()` names (asked at both ends: threads
        made meanwhile count from their start) and of the calling thread, the clock's holder."""
        return _Window(self, pids)

    def share(self) -> float | None:
        """Waiting time over the cores' clocked time (None: nothing watched)."""
        if not self.windows or self.window_s <= 0:
            return None
        return self.waited_s / (self.window_s * max(self.cores, 1))


class _Window:
    def __init__(self, side: SideContention, pids):
        self.side, self.pids = side, pids

    def __enter__(self):
        self.before = _waits(self.pids())
        self.started = time.perf_counter()

    def __exit__(self, kind, value, traceback):
        if kind is not None:
            return
        elapsed = time.perf_counter() - self.started
        after = _waits(self.pids())
        self.side.window_s += elapsed
        self.side.waited_s += sum(max(w - self.before.get(tid, 0), 0) for tid, w in after.items()) / 1e9
        self.side.windows += 1


def _waits(pids: list[int]) -> dict[str, int]:
    """Each live thread's time waiting to run so far, in ns; "clock" for the calling thread, which holds the
    clock and must wake to stop it."""
    waits: dict[str, int] = {}
    try:
        with open("/proc/thread-self/schedstat") as f:
            waits["clock"] = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        pass
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    waits[tid] = int(f.read().split()[1])
            except (OSError, ValueError, IndexError):
                continue
    return waits
