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
