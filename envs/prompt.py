"""The task statement the agent reads: reference module, backend contract, hardware, turns left."""

from __future__ import annotations

import ast
import functools
import os
import platform
import shutil
import subprocess

from kernelgym.envs.parsing import DONE_MARKER


@functools.cache
def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


@functools.cache
def gpu_name() -> str:
    # nvidia-smi rather than torch.cuda: initializing CUDA here would break vector envs that fork later.
    exe = shutil.which("nvidia-smi")
    if exe:
        try:
            out = subprocess.run([exe, "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=10, check=False)
            names = [n.strip() for n in out.stdout.splitlines() if n.strip()]
            if names:
                return names[0]
        except (OSError, subprocess.SubprocessError):
            pass
    return "an NVIDIA GPU"


def reference_for_prompt(source: str) -> str:
    """The module as the judge runs it, minus the `KERNELGYM = {...}` metadata (noise to the agent)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    lines = source.splitlines()
    for node in reversed(tree.body):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "KERNELGYM" and node.end_lineno is not None):
            del lines[node.lineno - 1:node.end_lineno]
    return "\n".join(lines).rstrip("\n")


def hardware_summary(device: str, threads: int = 1) -> str:
    if device == "cuda":
        return (f"Hardware: {gpu_name()} (CUDA). Timing runs each side on the GPU with the L2 cache flushed "
                "and the device synchronized.")
    cores = os.cpu_count() or 1
    return (f"Hardware: {cpu_name()} ({platform.machine()}, {cores} cores{simd_summary()}). Timing runs on "
            f"the CPU with {threads} thread(s) for both the reference and your solution.")


def simd_summary() -> str:
    """The widest vector extension the CPU has (C++ is built with -march=native): code written for 16-float
    vectors ran the bundled L3 kernels 20-40x slower where AVX-512 was missing."""
    from kernelgym.kernels import cpu_features

    flags = set(cpu_features().split())
    if "avx512f" in flags:
        return ", AVX-512: 16 floats a vector register"
    if "avx2" in flags:
        return ", AVX2 without AVX-512: 8 floats a vector register"
    return ""


def task_option_notes(heldout_shapes: bool, dtype: str, backward: bool) -> list[str]:
    """What the judge checks beyond the reference as shown: held-out shapes, the dtype, the backward."""
    notes = []
    if dtype != "float32":
        notes.append(f"- This run is in {dtype}: float inputs, parameters and outputs are {dtype} (the "
                     f"reference's too); tolerances are {dtype}'s. Computing in a narrower type is caught.")
    if backward:
        notes.append("- Forward and backward are judged and timed together: for an upstream gradient the "
                     "judge draws, autograd through your ModelNew must give the gradients of every float "
                     "input and of every parameter (in the reference's parameter order) that autograd of the "
                     "reference gives. Write the backward as your own kernels too (a "
                     "torch.autograd.Function), not PyTorch ops.")
    if heldout_shapes:
        notes.append("- Correctness is also checked at held-out shapes, different from the sizes shown above "
                     "and not named here: do not hardcode the shown sizes.")
    return notes


def build_prompt(
    *,
    task_id: str,
    task_name: str,
    level: int,
    category: str,
    reference: str,
    size: str,
    backend: str,
    contract: str,
    hardware: str,
    turns_left: int,
    max_turns: int,
    answer_format: str = "reply",
    done_marker: str = DONE_MARKER,
    target_speedup: float | None = None,
    heldout_shapes: bool = False,
    dtype: str = "float32",
    backward: bool = False,
) -> str:
    """One string; only the turns-left line changes between turns (so a prompt cache can reuse the rest)."""
    if answer_format == "tool":
        how = ("Submit each attempt by calling the `submit_kernel` tool with the whole module source as "
               "`code`; its answer is the judge's feedback. Stop calling it when you are done.")
    else:
        how = ("Answer each turn with the whole module in one ```python block; the judge's feedback comes "
               f"back as the next message. When you cannot improve further, reply with just {done_marker}.")
    goal = (f" The episode ends early once a verified speedup of {target_speedup:g}x is reached."
            if target_speedup else "")
    notes = task_option_notes(heldout_shapes, dtype, backward)
    return "\n".join([
        f"Task: {task_id} (KernelBench level {level}, {category}; problem size '{size}').",
        (f"Write a faster `ModelNew` for the reference PyTorch module `Model` ({task_name}) using the "
         f"'{backend}' backend."),
        "",
        "Reference module:",
        "```python",
        reference_for_prompt(reference),
        "```",
        "",
        "Solution rules:",
        contract.rstrip("\n"),
        *notes,
        "",
        hardware,
        "",
        ("The judge builds your module in an isolated process, checks it against the reference on fresh "
         "hidden inputs (a wrong output, a crash or a rule violation earns nothing), then times both: only a "
         f"speedup that is statistically verified is rewarded.{goal}"),
        how,
        "",
        f"Turns left: {turns_left} of {max_turns}.",
    ])
