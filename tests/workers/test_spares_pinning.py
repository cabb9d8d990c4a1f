"""A GPU worker's spare pair starts on any core and is pinned to its evaluation's cores when taken."""

import os
import shutil
import tempfile

import pytest

from kernelgym.workers import spares
from kernelgym.workers.candidate_side import run_candidate
from kernelgym.workers.process import EvalProcess
from kernelgym.workers.procfs import threads_of
from kernelgym.workers.reference_side import run_reference
from kernelgym.workers.sandbox import SandboxConfig


def _allowed(process: EvalProcess) -> set[frozenset[int]]:
    return {frozenset(os.sched_getaffinity(tid)) for pid in process.tree() for tid in threads_of(pid)}


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to tell pinned from not")
def test_taking_a_pair_pins_every_thread_of_both_processes():
    folder = tempfile.mkdtemp()
    processes = []
    for target, name in ((run_reference, "reference"), (run_candidate, "candidate")):
        os.mkdir(f"{folder}/{name}")
        processes.append(EvalProcess(target, None, f"{folder}/{name}", SandboxConfig(), False, cores=None))
    pair = spares.SparePair(folder, frozenset({1}), *processes)
    try:
        for process in processes:
            process.hello(10 ** 9)
        everywhere = frozenset(os.sched_getaffinity(0))
        assert all(_allowed(p) == {everywhere} for p in processes)  # started unpinned
        assert spares._pin(pair, {1})
        assert all(_allowed(p) == {frozenset({1})} for p in processes)
    finally:
        pair.discard()
        shutil.rmtree(folder, ignore_errors=True)


def test_a_gpu_pool_keeps_a_core_per_timing_slot_and_a_cpu_pool_none():
    from kernelgym.workers.pool_config import PoolConfig, timing_cores

    cores = sorted(os.sched_getaffinity(0))
    assert timing_cores(PoolConfig(), gpu=False, slots=1) == []
    assert timing_cores(PoolConfig(timing_core=False), gpu=True, slots=1) == []
    assert timing_cores(PoolConfig(timing_core=True), gpu=True, slots=1) == cores[-1:]
    assert timing_cores(PoolConfig(), gpu=True, slots=1) == (cores[-1:] if len(cores) >= 4 else [])
    # a pool spread over several GPUs times on each at once: a core for each slot, or none
    two = timing_cores(PoolConfig(timing_core=True), gpu=True, slots=2)
    assert two == (cores[-2:] if len(cores) >= 4 else [])
