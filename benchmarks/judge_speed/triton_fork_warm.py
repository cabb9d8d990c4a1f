"""A new Triton kernel's compile in a forked evaluation process, with and without the worker's warm-up.

Each evaluation is a process forked from the worker, with an empty Triton cache of its own. This measures the
compile of a new kernel in such a fork (to a cubin for sm_90, no GPU needed): first forked from a parent that
has only imported torch and Triton (as the worker had), then from the same parent after
`kernelgym.workers.triton_warm.warm_compiler`, in one run:

    python benchmarks/judge_speed/triton_fork_warm.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def scaled_add_{n}(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * {n} + tl.load(y_ptr + offsets, mask=mask), mask=mask)
'''


def child_compile_s(n: int) -> float:
    """Fork; the child writes and imports a new kernel's module and compiles it; its seconds come back."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource

        folder = tempfile.mkdtemp()
        os.environ["TRITON_CACHE_DIR"] = os.path.join(folder, "cache")
        with open(os.path.join(folder, f"k{n}.py"), "w") as f:
            f.write(KERNEL.format(n=n))
        sys.path.insert(0, folder)
        kernel = getattr(__import__(f"k{n}"), f"scaled_add_{n}")
        signature = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
        started = time.perf_counter()
        triton.compile(ASTSource(kernel, signature, {"BLOCK": 1024}), target=GPUTarget("cuda", 90, 32))
        os.write(write, repr(time.perf_counter() - started).encode())
        os._exit(0)
    os.close(write)
    data = os.read(read, 64)
    os.close(read)
    os.waitpid(pid, 0)
    return float(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    import torch  # noqa: F401  (the worker has torch and Triton imported before it forks)
    import triton  # noqa: F401

    cold = [child_compile_s(i) for i in range(args.runs)]
    from kernelgym.workers.triton_warm import warm_compiler

    started = time.perf_counter()
    assert warm_compiler(90)
    warm_s = time.perf_counter() - started
    warm = [child_compile_s(100 + i) for i in range(args.runs)]
    print(f"worker's warm-up: {warm_s:.2f} s once")
    print(f"new kernel in a fork, cold parent: {', '.join(f'{s:.3f}' for s in cold)} s "
          f"(median {statistics.median(cold):.3f})")
    print(f"new kernel in a fork, warm parent: {', '.join(f'{s:.3f}' for s in warm)} s "
          f"(median {statistics.median(warm):.3f})")


if __name__ == "__main__":
    main()
