"""The IP sampler against real processes and the real kernel interface: where a child spends its CPU time,
by shared library, seen from outside it (issue 28: evidence the solution's own code did the work)."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from kernelgym.evaluation.ip_sampler import IpSampler

SPIN_C = ("double spin(long n) { double x = 0; for (long i = 0; i < n; i++) x = x * 0.999999 + 1.0; "
          "return x; }\n")

# The child loads the library in every mode, so only where its time goes differs. It prints "ready" once
# its threads are running; in "native+thread" it starts one more thread when a line comes on stdin, which
# loads a second copy of the library (argv[3]) and spins in it.
CHILD = textwrap.dedent("""
    import ctypes, sys, threading
    def load(path):
        lib = ctypes.CDLL(path)
        lib.spin.argtypes, lib.spin.restype = [ctypes.c_long], ctypes.c_double
        return lib
    lib = load(sys.argv[1])
    mode = sys.argv[2]
    if mode == "python":
        import numpy as np
        a = np.random.default_rng(0).random((64, 64))
    def work(lib=lib):
        while True:
            if mode == "python":
                sum(i * i for i in range(2000))
                a @ a
            else:
                lib.spin(2_000_000)  # about a millisecond: the call's Python overhead is noise
    threading.Thread(target=work, daemon=True).start()
    print("ready", flush=True)
    if mode == "native+thread":
        sys.stdin.readline()
        extra = threading.Thread(target=lambda: work(load(sys.argv[3])), daemon=True)
        extra.start()
        print(extra.native_id, flush=True)
    threading.Event().wait()
""")

REGION_S = 0.4  # wall time sampled: even at a quarter of a busy core that is ~1,000 samples


@pytest.fixture(scope="module")
def spin_lib(tmp_path_factory):
    if shutil.which("cc") is None:
        pytest.skip("no C compiler (cc) to build the test library")
    folder = tmp_path_factory.mktemp("ip_sampler")
    (folder / "spin.c").write_text(SPIN_C)
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", "libspin.so", "spin.c"], cwd=folder, check=True)
    return str(folder / "libspin.so")


def _child(lib: str, mode: str, *more: str) -> subprocess.Popen:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}  # one core's worth of work
    child = subprocess.Popen([sys.executable, "-c", CHILD, lib, mode, *more], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdout.readline().strip() == "ready"
    return child


def _sample(child: subprocess.Popen, seconds: float = REGION_S, **options):
    sampler = IpSampler(child.pid, **options)
    try:
        assert sampler.start(), sampler.refused
        time.sleep(seconds)
        return sampler.stop()
    finally:
        sampler.close()


def _stop(child: subprocess.Popen) -> None:
    child.kill()
    child.wait()


def test_time_spent_in_the_library_is_attributed_to_it(spin_lib):
    child = _child(spin_lib, "native")
    try:
        samples = _sample(child)
    finally:
        _stop(child)
    assert samples.available
    assert samples.samples_total >= 100, samples
    assert samples.share_in([spin_lib]) > 0.7, samples.samples_by_path
    assert samples.lost_records == 0 and samples.complete
    assert child.pid in samples.threads_sampled and len(samples.threads_sampled) >= 2
    # One sample per period of CPU time: the count agrees with the CPU time the kernel charged the threads.
    sampled_ns = samples.samples_total * samples.period_ns
    assert 0.5 * samples.cpu_ns_sampled_threads <= sampled_ns <= 1.2 * samples.cpu_ns_sampled_threads


def test_a_loaded_but_idle_library_gets_almost_no_samples(spin_lib):
    child = _child(spin_lib, "python")
    try:
        samples = _sample(child)
    finally:
        _stop(child)
    assert samples.available
    assert samples.samples_total >= 100, samples
    assert samples.share_in([spin_lib]) < 0.1, samples.samples_by_path
    # The time went to the interpreter and numpy, each named by its own file.
    assert any("python" in path or "numpy" in path or "blas" in path for path in samples.samples_by_path)


def test_a_ring_that_fills_up_is_reported(spin_lib):
    """One page holds ~170 samples (17 ms of one thread's CPU): the rest of the region is dropped, and the
    result must say so, or code that filled the ring first would hide what ran after it."""
    child = _child(spin_lib, "native")
    try:
        samples = _sample(child, ring_pages=1)
    finally:
        _stop(child)
    assert samples.rings_overflowed >= 1 and not samples.complete
    assert samples.samples_total * samples.period_ns < 0.5 * samples.cpu_ns_sampled_threads


def test_a_thread_born_while_sampling_is_reported_unsampled(spin_lib, tmp_path):
    second_copy = tmp_path / "libspin_second.so"
    shutil.copy(spin_lib, second_copy)
    child = _child(spin_lib, "native+thread", str(second_copy))
    sampler = IpSampler(child.pid)
    try:
        assert sampler.start(), sampler.refused
        child.stdin.write("go\n")
        child.stdin.flush()
        extra_tid = int(child.stdout.readline())
        time.sleep(REGION_S / 2)
        samples = sampler.stop()
    finally:
        sampler.close()
        _stop(child)
    assert extra_tid in samples.threads_unsampled
    assert extra_tid not in samples.threads_sampled
    assert not samples.complete
    # The unsampled thread's library shows as code mapped while sampling (the maps at start and stop differ).
    assert str(second_copy) in samples.exec_mappings_added


def test_with_its_cpus_known_a_thread_born_while_sampling_is_sampled_too(spin_lib, tmp_path):
    """Inherited per-CPU events (what the judge uses once a cpuset holds the candidate): a thread started
    during the region is sampled, and its time is in the CPU time read at stop."""
    second_copy = tmp_path / "libspin_second.so"
    shutil.copy(spin_lib, second_copy)
    child = _child(spin_lib, "native+thread", str(second_copy))
    sampler = IpSampler(child.pid, cpus=tuple(sorted(os.sched_getaffinity(child.pid))))
    try:
        assert sampler.start(), sampler.refused
        child.stdin.write("go\n")
        child.stdin.flush()
        int(child.stdout.readline())
        time.sleep(REGION_S)
        samples = sampler.stop()
    finally:
        sampler.close()
        _stop(child)
    assert samples.threads_unsampled == ()
    assert samples.share_in([str(second_copy)]) > 0.2, samples.samples_by_path
    sampled_ns = samples.samples_total * samples.period_ns
    assert 0.5 * samples.cpu_ns_sampled_threads <= sampled_ns <= 1.2 * samples.cpu_ns_sampled_threads


def test_paused_regions_are_counted_apart(spin_lib):
    """pause() ends a region and resume() starts the next on the same open events (the judge's batches)."""
    child = _child(spin_lib, "native")
    sampler = IpSampler(child.pid)
    try:
        assert sampler.start(), sampler.refused
        time.sleep(REGION_S)
        first = sampler.pause()
        time.sleep(REGION_S)  # paused: nothing counted
        sampler.resume()
        time.sleep(REGION_S / 2)
        second = sampler.stop()
    finally:
        sampler.close()
        _stop(child)
    for region in (first, second):
        assert region.share_in([spin_lib]) > 0.7, region.samples_by_path
        sampled_ns = region.samples_total * region.period_ns
        assert 0.5 * region.cpu_ns_sampled_threads <= sampled_ns <= 1.2 * region.cpu_ns_sampled_threads
    assert second.cpu_ns_sampled_threads < 0.8 * first.cpu_ns_sampled_threads


def test_a_target_that_does_not_exist_is_a_clear_error():
    with open("/proc/sys/kernel/pid_max") as pid_max:
        missing = int(pid_max.read()) + 1  # above any pid the kernel can hand out
    with pytest.raises(ProcessLookupError, match=str(missing)):
        IpSampler(missing).start()


def test_a_refused_open_gives_an_unavailable_result_naming_the_permission():
    """An unprivileged process may not sample a root process (no ptrace access, no CAP_PERFMON): the real
    refusal, from the real kernel, in a forked child that gave up root."""
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to an unprivileged user")
    target = os.getpid()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop root, try, report through the pipe, never return into pytest
        try:
            os.close(read_end)
            os.setgid(65534)
            os.setuid(65534)
            sampler = IpSampler(target)
            started = sampler.start()
            result = sampler.stop()
            report = {"started": started, "available": result.available, "reason": result.reason,
                      "share": result.share_in(["/nonexistent.so"])}
        except BaseException as e:  # noqa: BLE001 - anything at all must reach the parent
            report = {"error": repr(e)}
        os.write(write_end, json.dumps(report).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        report = json.loads(pipe.read())
    os.waitpid(pid, 0)
    assert "error" not in report, report
    assert report["started"] is False and report["available"] is False
    assert "perf_event_paranoid" in report["reason"] and "CAP_PERFMON" in report["reason"], report
    assert "\n" not in report["reason"]
    assert report["share"] == 0.0


def test_code_mapped_while_sampling_is_listed(spin_lib, tmp_path):
    """A library loaded inside the region (here by the test process into itself) shows in
    exec_mappings_added: code that appears at sampled addresses before stop does not pass unnoticed."""
    fresh = tmp_path / "libspin_fresh.so"  # a path this process has never mapped
    shutil.copy(spin_lib, fresh)
    sampler = IpSampler(os.getpid())
    try:
        assert sampler.start(), sampler.refused
        lib = ctypes.CDLL(str(fresh))
        lib.spin.argtypes, lib.spin.restype = [ctypes.c_long], ctypes.c_double
        lib.spin(20_000_000)
        samples = sampler.stop()
    finally:
        sampler.close()
    assert str(fresh) in samples.exec_mappings_added
    assert samples.share_in([fresh]) > 0.5, samples.samples_by_path
