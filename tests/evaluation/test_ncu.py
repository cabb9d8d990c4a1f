"""The Nsight Compute pass: its command, the parsing of ncu's CSV, and what the result and feedback say."""

from pathlib import Path

from kernelgym.evaluation import ncu
from kernelgym.evaluation.feedback import render_feedback
from kernelgym.evaluation.result import EvalResult, KernelMetrics, ProfileResult, Verdict
from kernelgym.solutions import examples
from kernelgym.tasks import bundled

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
          '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def _row(launch, kernel, metric, unit, value):
    return (f'"{launch}","4242","python3","127.0.0.1","{kernel}","1","7","(256, 1, 1)",'
            f'"(1056, 1, 1)","0","9.0","Command line profiler metrics","{metric}","{unit}","{value}"')


def _sample(metrics):
    lines = ["==PROF== Connected to process 4242", "==PROF== Profiling \"relu_kernel\": 0%....50%....100%",
             HEADER]
    values = {"duration_us": ("nsecond", "131,072"), "memory_throughput_pct": ("%", "91.5"),
              "compute_throughput_pct": ("%", "12.25"), "achieved_occupancy_pct": ("%", "80.1"),
              "registers_per_thread": ("register/thread", "16")}
    for launch, kernel in (("0", "relu_kernel(const float4 *, float4 *, long)"),
                           ("1", "relu_tail(const float *, float *, long, long)")):
        for name, (unit, value) in values.items():
            lines.append(_row(launch, kernel, metrics[name], unit, value))
    return "\n".join(lines) + "\n==PROF== Disconnected from process 4242\n"


def test_parse_reads_one_entry_per_launch_with_base_units():
    metrics = ncu.chosen_metrics(frozenset())
    kernels = ncu.parse(_sample(metrics), metrics)
    assert [k.kernel.split("(")[0] for k in kernels] == ["relu_kernel", "relu_tail"]
    first = kernels[0]
    assert first.duration_us == 131.072  # nanoseconds with a thousands separator, in microseconds
    assert first.memory_throughput_pct == 91.5 and first.compute_throughput_pct == 12.25
    assert first.achieved_occupancy_pct == 80.1 and first.registers_per_thread == 16
    assert first.local_load_instructions is None  # not in the output: unknown, not zero


def test_parse_without_a_table_gives_nothing():
    assert ncu.parse("==ERROR== the profiler could not connect\n", ncu.chosen_metrics(frozenset())) == []


def test_only_metrics_the_host_supports_are_asked_for():
    available = frozenset({"gpu__time_duration", "sm__throughput", "smsp__inst_executed_op_local_ld"})
    chosen = ncu.chosen_metrics(available)
    assert chosen["duration_us"] == "gpu__time_duration.sum"
    # a launch attribute, never listed
    assert chosen["registers_per_thread"] == "launch__registers_per_thread"
    assert chosen["local_load_instructions"] == "smsp__inst_executed_op_local_ld.sum"  # the fallback name
    assert "memory_throughput_pct" not in chosen and "local_store_instructions" not in chosen
    cmd = ncu.command("/usr/bin/ncu", chosen, "/tmp/job")
    assert cmd[cmd.index("--clock-control") + 1] == "none"  # the card's clocks are left alone
    assert "--profile-from-start" in cmd and cmd[-2:] == ["kernelgym.workers.ncu_child", "/tmp/job"]
    assert set(cmd[cmd.index("--metrics") + 1].split(",")) == set(chosen.values())


def test_feedback_lists_kernels_by_time_and_the_result_round_trips():
    result = EvalResult("bundled/L1/1_ReLU", "cuda", "gpu", Verdict.OK)
    result.profile = ProfileResult(coverage=1.0, kernels=[
        KernelMetrics("void relu_tail(const float*)", duration_us=2.0),
        KernelMetrics("void relu_kernel(const float4*)", duration_us=130.0, memory_throughput_pct=91.0,
                      compute_throughput_pct=12.0, achieved_occupancy_pct=80.0, registers_per_thread=16,
                      local_load_instructions=0, local_store_instructions=64),
    ], ncu_note="ncu: 2 kernel launch(es) profiled in 4.0 s")
    text = render_feedback(result)
    assert text.index("relu_kernel: 130 us") < text.index("relu_tail")
    assert "memory 91% / compute 12% of peak" in text and "16 registers/thread" in text
    assert "64 local-memory instructions" in text
    again = EvalResult.from_dict(result.to_dict())
    assert again.profile.kernels[1] == result.profile.kernels[1]


def test_ncu_on_a_machine_without_gpu_is_a_note_not_a_failure(pool):
    example = next(e for e in examples("cpp") if e.task_id.endswith("L1/1_ReLU"))
    result = pool.evaluate(bundled().get(example.task_id), example.source, backend="cpp", ncu=True)
    assert result.verdict is Verdict.OK
    assert result.profile.kernels == [] and "ran on the CPU" in result.profile.ncu_note
    assert "ran on the CPU" in render_feedback(result)


FAKE_NCU = r'''#!/usr/bin/env python3
# Stands in for Nsight Compute: prints a table, or starts a "profiled" process that never ends.
import os, subprocess, sys, time
if "--query-metrics" in sys.argv:
    sys.exit(0)
job_dir = sys.argv[-1]
mode = os.environ["FAKE_NCU_MODE"]
if mode == "picky" and "local_ld" in sys.argv[sys.argv.index("--metrics") + 1]:
    print("==ERROR== Failed to find metric smsp__sass_inst_executed_op_local_ld.sum")
    sys.exit(1)
if mode in ("table", "picky"):
    print(open(os.path.join(os.path.dirname(__file__), "table.csv")).read())
    sys.exit(0)
code = ("import os, sys, time; open(sys.argv[1] + '/child.pid', 'w').write(str(os.getpid())); "
        "os.setsid(); time.sleep(600)")
subprocess.Popen([sys.executable, "-c", code, job_dir])
time.sleep(600)
'''


def _fake_ncu(tmp_path, monkeypatch, mode):
    import os

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "ncu"
    script.write_text(FAKE_NCU)
    script.chmod(0o755)
    (bin_dir / "table.csv").write_text(_sample(ncu.chosen_metrics(frozenset())))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NCU_MODE", mode)
    ncu.available_metrics.cache_clear()
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    return str(job_dir)


def test_collect_reads_the_table_ncu_prints(tmp_path, monkeypatch):
    from kernelgym.workers.sandbox import SandboxConfig

    job_dir = _fake_ncu(tmp_path, monkeypatch, "table")
    kernels, note = ncu.collect(job_dir, {"task_source": ""}, SandboxConfig(), timeout_s=30)
    ncu.available_metrics.cache_clear()
    assert len(kernels) == 2 and kernels[0].memory_throughput_pct == 91.5
    assert note.startswith("ncu: 2 kernel launch(es) profiled")


def test_collect_past_its_limit_kills_ncu_and_the_profiled_process(tmp_path, monkeypatch):
    import time

    from kernelgym.workers.sandbox import SandboxConfig

    job_dir = _fake_ncu(tmp_path, monkeypatch, "hang")
    started = time.monotonic()
    kernels, note = ncu.collect(job_dir, {"task_source": ""}, SandboxConfig(), timeout_s=3)
    ncu.available_metrics.cache_clear()
    assert kernels == [] and "ran past 3 s" in note
    assert time.monotonic() - started < 20
    child = int(Path(job_dir, "child.pid").read_text())
    for _ in range(50):  # killed: gone, or a zombie waiting for its (dead) parent's reaper
        try:
            state = Path(f"/proc/{child}/stat").read_text().split(")")[1].split()[0]
        except FileNotFoundError:
            break
        if state == "Z":
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the profiled process {child} outlived the ncu timeout")


def test_a_metric_ncu_rejects_leads_to_a_second_try_with_the_core_metrics(tmp_path, monkeypatch):
    from kernelgym.workers.sandbox import SandboxConfig

    job_dir = _fake_ncu(tmp_path, monkeypatch, "picky")
    kernels, note = ncu.collect(job_dir, {"task_source": ""}, SandboxConfig(), timeout_s=30)
    ncu.available_metrics.cache_clear()
    assert len(kernels) == 2 and kernels[0].registers_per_thread == 16, note
