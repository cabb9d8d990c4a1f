"""The candidate cannot reach any trusted process, even when kernelgym runs as root (CI does).

The solution below is honest about its output but, at import, tries what a cheat would: read the memory of
every process it can name (the worker, the caller, anything /proc shows), signal the worker, write into
kernelgym's build cache, and look for descriptors inherited from the worker. It prints what worked; the
test reads that from the result's output tail.
"""

from __future__ import annotations

import os

import pytest

from kernelgym.evaluation.result import Verdict
from kernelgym.kernels import cache_root
from kernelgym.tasks import bundled

PROBE = r'''
import os
import torch
import torch.nn as nn
from kernelgym.kernels import load_cpp

TARGETS = {targets}
CACHE = {cache!r}


def _try_read(pid):
    try:
        with open(f"/proc/{{pid}}/maps") as f:
            first = f.readline().split()[0].split("-")[0]
        with open(f"/proc/{{pid}}/mem", "rb", buffering=0) as f:
            f.seek(int(first, 16))
            return len(f.read(16)) > 0
    except (OSError, ValueError, IndexError):
        return False


seen = {{int(p) for p in os.listdir("/proc") if p.isdigit()}} | set(TARGETS)
for pid in sorted(seen - {{os.getpid()}}):
    if _try_read(pid):
        print(f"READ-OK {{pid}}", flush=True)
# (as root, in its own PID namespace, its parent is pid 1 there: the helper that only waits for it)
for pid in sorted(set(TARGETS) - {{os.getpid(), os.getppid()}}):
    try:
        os.kill(pid, 0)
        print(f"SIGNAL-OK {{pid}}", flush=True)
    except OSError:
        pass
try:
    with open(os.path.join(CACHE, "planted-by-candidate"), "w") as f:
        f.write("x")
    print("CACHE-WRITE-OK", flush=True)
except OSError as exc:
    print(f"cache write refused: {{exc}}", flush=True)
links = []
for fd in os.listdir("/proc/self/fd"):
    try:
        links.append(os.readlink(f"/proc/self/fd/{{fd}}"))
    except OSError:
        pass
print(f"SOCKETS {{sum(link.startswith('socket:') for link in links)}}", flush=True)
if any("memfd:" in link for link in links):
    print("MEMFD-OK", flush=True)
print("PROBE-DONE", flush=True)

lib = load_cpp(r"""
#include <cstdint>
extern "C" void relu(const float* x, float* y, int64_t n) {{
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : 0;
}}
""")


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.relu(x, y, x.numel())
        return y
'''


@pytest.mark.slow
def test_the_candidate_reaches_no_trusted_process(pool):
    # Every process of this machine as the test sees it: the caller, the workers, whatever else runs.
    targets = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    source = PROBE.format(targets=targets, cache=str(cache_root()))
    result = pool.evaluate(bundled().get("L1/1_ReLU"), source, backend="cpp", timing=False)
    tail = result.output_tail
    assert "PROBE-DONE" in tail, (result.verdict, result.reasons, tail[-2000:])
    assert result.verdict is Verdict.OK, result.reasons
    assert "READ-OK" not in tail, tail
    # Nothing inherited from the worker: its socket to the reference, its pool connection, its buffers.
    assert "SOCKETS 1" in tail and "MEMFD-OK" not in tail, tail
    if os.geteuid() == 0:  # as root the candidate has its own PID namespace and a read-only filesystem
        assert "SIGNAL-OK" not in tail, tail
        assert "CACHE-WRITE-OK" not in tail, tail
    assert not (cache_root() / "planted-by-candidate").exists()
