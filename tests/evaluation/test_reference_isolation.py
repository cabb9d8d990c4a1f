"""The reference runs alone: whenever it computes, every thread of the candidate is stopped.

They share cores, so a candidate live beside the reference (a thread that spins while its own process waits
for the judge) would slow the reference and be paid for it. The task here is the witness: its Model looks
through /proc for the candidate's marked thread at every call and writes down that thread's state.

The reference's own start (its model, the probe call, the FLOP count) runs while the candidate loads beside
it: nothing there is timed. So the candidate's thread starts at its first forward, when the reference's
start is over (the worker waits for it before any trial); a thread started at load would be seen live in
those untimed calls, or not, as the candidate's build was cached or not.
"""

from collections import Counter

from kernelgym.evaluation.result import Verdict
from kernelgym.tasks import task_from_source

WITNESS_TASK = '''
import os
import torch
import torch.nn as nn

LOG = {log!r}


def marked_thread_states():
    states = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for tid in os.listdir(f"/proc/{{pid}}/task"):
                with open(f"/proc/{{pid}}/task/{{tid}}/stat") as f:
                    stat = f.read()
                if "(kg-witnessed)" in stat:
                    states.append(stat.rsplit(")", 1)[1].split()[0])
        except OSError:  # a process or thread that ended while we looked
            continue
    return states


class Model(nn.Module):
    def forward(self, x):
        with open(LOG, "a") as f:
            f.write(" ".join(marked_thread_states() or ["none"]) + "\\n")
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4096)]


def get_init_inputs():
    return []
'''

CANDIDATE_WITH_A_LIVE_THREAD = r'''
import torch
import torch.nn as nn
from kernelgym.kernels import load_cpp

lib = load_cpp(r"""
#include <cstdint>
#include <mutex>
#include <pthread.h>
#include <thread>
#include <unistd.h>
static void idle() {
    pthread_setname_np(pthread_self(), "kg-witnessed");
    for (;;) usleep(200);
}
static std::once_flag started;
extern "C" void relu(const float* x, float* y, int64_t n) {
    std::call_once(started, [] { std::thread(idle).detach(); });
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
""")

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.relu(x.contiguous(), y, x.numel())
        return y
'''


def test_the_candidate_is_stopped_whenever_the_reference_computes(pool, tmp_path):
    log = tmp_path / "witness.log"
    log.touch()
    source = WITNESS_TASK.format(log=str(log))
    task = task_from_source(source, suite="user", level=1, file_name="1_Witness.py")
    result = pool.evaluate(task, CANDIDATE_WITH_A_LIVE_THREAD, backend="cpp")
    assert result.verdict is Verdict.OK, result.reasons
    seen = Counter(log.read_text().split())
    seen.pop("none", None)  # calls made before the candidate's first forward started its thread
    assert sum(seen.values()) >= 20, seen  # the witness saw the candidate's thread in the timed batches
    assert set(seen) <= {"T", "t"}, f"the candidate's thread was live while the reference computed: {seen}"
