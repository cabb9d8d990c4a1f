"""What a worker imports before it forks evaluation processes, so that each does not import it again."""

import subprocess
import sys
import textwrap


def test_a_gpu_worker_preloads_what_the_profilers_first_use_imports():
    """Every GPU evaluation profiles its candidate with torch.profiler, whose first use in a process imports
    torch._dynamo. Left out of the worker's preimports, that import was 3.6 s of every GPU evaluation on the
    H200 (its profile stage took 3.6 s instead of 0.1-0.5 s)."""
    script = textwrap.dedent("""
        import sys
        from kernelgym.workers.worker import _preimport
        _preimport(has_gpu=True)
        import torch
        from torch.profiler import ProfilerActivity, profile
        before = set(sys.modules)
        with profile(activities=[ProfilerActivity.CPU]):
            torch.ones(2).add(1)
        late = sorted(m for m in set(sys.modules) - before if m.startswith(("torch._dynamo", "sympy")))
        print("LATE", len(late), late[:5])
        print("CUDA", torch.cuda.is_initialized())
    """)
    out = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True,
                         timeout=300)
    assert "LATE 0 []" in out.stdout, out.stdout + out.stderr[-2000:]
    assert "CUDA False" in out.stdout, out.stdout


def test_a_worker_for_one_evaluation_skips_the_warm_ups_and_still_judges(tmp_path):
    """`kernelgym eval FILE` judges one candidate: the profiler's warm-up (about a second and a half on CI's
    VMs) would only delay it. Without it the worker has not imported torch._dynamo, and the evaluation is
    judged the same."""
    from kernelgym import EvalPool
    from kernelgym.solutions import examples
    from kernelgym.tasks import bundled

    script = textwrap.dedent("""
        import sys
        from kernelgym.workers.worker import _preimport
        _preimport(has_gpu=False, warm_up=False)
        print("DYNAMO", "torch._dynamo" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True,
                         timeout=300)
    assert "DYNAMO False" in out.stdout, out.stdout + out.stderr[-2000:]
    relu = next(e for e in examples("cpp") if e.task_id == "bundled/L1/1_ReLU")
    with EvalPool(workers=1, warm_up=False, work_root=str(tmp_path)) as pool:
        result = pool.evaluate(bundled().get("L1/1_ReLU"), relu.source, backend="cpp", size="cpu",
                               timing=False)
    assert result.verdict.value == "ok", result.reasons
