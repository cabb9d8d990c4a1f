"""A process the candidate orphans (a double fork, a daemon) stays inside its evaluation: adopted by a process
of the evaluation's tree, so it is frozen with the candidate and killed at the end. With a PID namespace the
namespace's first process adopts it; without one (a GPU host, a user without root) the keeper does. Before
the keeper, such a daemon was adopted by init: it spun on the reference's core while the candidate was
frozen and outlived the evaluation (tests/adversarial/cpp_escaped_daemon_contends_reference.py)."""

from __future__ import annotations

import os
import re
import time

import pytest

from kernelgym.evaluation.result import Verdict
from kernelgym.tasks import bundled
from kernelgym.tasks.cpu_size import with_cpu_size
from kernelgym.workers.pool import EvalPool, PoolConfig
from kernelgym.workers.procfs import dead_or_dying
from kernelgym.workers.sandbox import SandboxConfig

DAEMON = r'''
import os
import torch
import torch.nn as nn
from kernelgym.kernels import load_cpp

lib = load_cpp(r"""
#include <cstdint>
#include <cstdio>
#include <sys/wait.h>
#include <unistd.h>
extern "C" void spawn_daemon() {
    const pid_t middle = fork();
    if (middle == 0) {
        setsid();
        if (fork() == 0) {
            usleep(300000);  // by now the middle process has exited: this one is an orphan
            dprintf(1, "DAEMON %d PARENT %d\n", getpid(), getppid());
            sleep(120);
            _exit(0);
        }
        _exit(0);
    }
    waitpid(middle, nullptr, 0);
    usleep(600000);  // the daemon has reported
}
extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
""")
print(f"CANDIDATE {os.getpid()} PARENT {os.getppid()}", flush=True)
lib.spawn_daemon()


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.relu(x.contiguous(), y, x.numel())
        return y
'''


@pytest.mark.parametrize("pid_namespace", [False, True], ids=["keeper", "pid_namespace"])
def test_an_orphaned_daemon_is_adopted_inside_the_evaluation_and_ends_with_it(pid_namespace):
    config = PoolConfig(workers=1, sandbox=SandboxConfig(pid_namespace=pid_namespace))
    with EvalPool(config) as pool:
        result = pool.evaluate(with_cpu_size(bundled().get("L1/1_ReLU")), DAEMON, backend="cpp", timing=False)
    tail = result.output_tail
    assert result.verdict is Verdict.OK, (result.reasons, tail[-2000:])
    candidate = re.search(r"CANDIDATE (\d+) PARENT (\d+)", tail)
    daemon = re.search(r"DAEMON (\d+) PARENT (\d+)", tail)
    assert candidate and daemon, tail[-2000:]
    # Adopted by the candidate's own parent (the keeper, or the namespace's first process): inside the tree.
    assert daemon.group(2) == candidate.group(2), tail[-2000:]
    if not pid_namespace or os.geteuid() != 0:  # pids as this test sees them: it ended with the evaluation
        pid = int(daemon.group(1))
        deadline = time.monotonic() + 2
        while not dead_or_dying(pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert dead_or_dying(pid), f"the daemon {pid} outlived its evaluation"
