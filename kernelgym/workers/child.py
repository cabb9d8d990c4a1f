"""The two kinds of forked evaluation process: the reference runner and the candidate runner.

The reference runner never sees candidate code: it draws the inputs from the per-evaluation seeds and
computes the expected outputs. The candidate runner imports the solution, runs it on the same inputs and
sends the outputs to the trusted process, which compares them; then it times candidate and reference.
Nothing here decides a verdict: this process may be fully controlled by the candidate.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import sys
import threading
import traceback
import types
from dataclasses import dataclass, field

import torch

import kernelgym.kernels as kernels
from kernelgym.evaluation import timing as timing_mod
from kernelgym.evaluation.profile import own_kernel_names
from kernelgym.evaluation.profile import profile_candidate as _profile_candidate
from kernelgym.workers import protocol

INPUT_SETS_FOR_TIMING = 3

# The in-process checks use these, bound when kernelgym loads (before any candidate code runs), so a
# candidate that rebinds Tensor methods or torch functions cannot blind them.
_storage_of = torch.Tensor.untyped_storage
_storage_ptr = torch.UntypedStorage.data_ptr
_clone = torch.Tensor.clone
_equal = torch.equal
_numel = torch.Tensor.numel
_active_threads = threading.active_count
_cudnn_tf32 = torch._C._get_cudnn_allow_tf32
_cublas_tf32 = torch._C._get_cublas_allow_tf32
_matmul_precision = torch.get_float32_matmul_precision
_plain_tensor = torch.Tensor
_list_dir = os.listdir


_WATCHED_MODULES = ("torch", "torch.nn.functional", "torch.cuda", "torch.testing", "torch.backends", "time",
                    "torch.utils.cpp_extension", "torch.profiler", "torch.utils._python_dispatch", "threading")


_WATCHED_CLASSES: list[type] = []  # the task's classes (Model), whose methods the reference timing uses


def _watched() -> dict[str, dict]:
    spaces = {name: vars(module) for name, module in list(sys.modules.items())
              if module is not None and (name.startswith("kernelgym.") or name == "kernelgym" or name in _WATCHED_MODULES)}
    spaces["torch.Tensor"] = dict(vars(torch.Tensor))
    spaces["torch.nn.Module"] = dict(vars(torch.nn.Module))
    spaces["torch.UntypedStorage"] = dict(vars(torch.UntypedStorage))
    # The GPU timer's class: the judge binds its methods early, but a candidate patching it is tampering.
    spaces["torch.cuda.Event"] = dict(vars(torch.cuda.Event))
    for cls in _WATCHED_CLASSES:
        spaces[f"task.{cls.__name__}"] = dict(vars(cls))
    if "kernelgym_task" in sys.modules:
        spaces["task"] = vars(sys.modules["kernelgym_task"])
    return spaces


def integrity_snapshot() -> dict[tuple[str, str], int]:
    """Identities of the functions and classes the judge relies on, taken before the candidate is imported."""
    return {(space, key): id(value) for space, names in _watched().items() for key, value in list(names.items())
            if callable(value) or isinstance(value, types.ModuleType)}


def tampered(before: dict[tuple[str, str], int]) -> list[str]:
    """What the candidate replaced or removed since `before` (additions, e.g. lazy imports, are fine)."""
    now = _watched()
    changed = []
    for (space, key), identity in before.items():
        names = now.get(space)
        if names is None or key not in names or id(names[key]) != identity:
            changed.append(f"{space}.{key}")
    return changed


def os_threads() -> int:
    """Threads of this process as the kernel sees them (Python's threading module misses raw threads)."""
    try:
        return len(_list_dir("/proc/self/task"))
    except OSError:
        return 0


@dataclass
class ChildJob:
    """What a forked process needs; built by the trusted process, never by the candidate."""

    task_source: str  # the module at the chosen size
    solution_source: str
    backend: str
    device: str  # "cpu" or "cuda"
    mode: str  # "run", "interpret" (Triton without GPU), "compile" (CUDA without GPU)
    dtype: str
    init_seed: int
    trial_seeds: list[int]
    perturbed: list[bool]
    perturb: str
    timing: bool
    timing_config: timing_mod.TimingConfig = field(default_factory=timing_mod.TimingConfig)
    profile: bool = True
    threads: int = 1
    compile_baseline: bool = False  # also time torch.compile of the reference (before any candidate code)
    roofline: bool = True  # the reference process reports the task's FLOPs and bytes (and peaks, if asked)
    cached_peaks: dict | None = None  # the machine's measured peaks, when the worker has them already
    cached_compile_ms: float | None = None  # a baseline measured earlier on this hardware and software


# helpers shared by both runners ---------------------------------------------------------------------------

def load_module(source: str, name: str, path: str | None = None) -> types.ModuleType:
    """Import `source` as a module; from a real file when given (Triton needs the source on disk)."""
    if path is not None:
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(source)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    module = types.ModuleType(name)
    module.__file__ = f"<{name}>"
    sys.modules[name] = module
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module


def make_inputs(task_module, seed: int, perturbed: bool, perturb: str, dtype: torch.dtype, device: str) -> list:
    torch.manual_seed(seed)
    # Factories inside get_inputs() allocate on the run's device: no host-side generation and copy of GBs.
    with torch.device(device):
        inputs = list(task_module.get_inputs())
    if perturbed and perturb != "none":
        gen = torch.Generator().manual_seed(seed ^ 0x5EED)
        scale = float(torch.empty(()).uniform_(1.5, 4.0, generator=gen))
        shift = 0.0 if perturb == "positive" else float(torch.empty(()).uniform_(-1.5, 0.5, generator=gen))
        inputs = [x * scale + shift if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
    # Integer inputs (targets, indices) keep their dtype whatever the run's float dtype is.
    return [x.to(device=device, dtype=dtype) if isinstance(x, torch.Tensor) and x.is_floating_point()
            else x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]


def build_model(cls, task_module, seed: int, dtype: torch.dtype, device: str):
    torch.manual_seed(seed)
    init_inputs = list(task_module.get_init_inputs())
    torch.manual_seed(seed)
    return cls(*init_inputs).to(device=device, dtype=dtype)


def error_meta(stage: str, exc: BaseException) -> dict:
    message = f"{type(exc).__name__}: {exc}"
    tb = traceback.extract_tb(exc.__traceback__)
    # Keep the candidate's own frames: the lines an agent can act on.
    frames = [f"  line {f.lineno} in {f.name}: {f.line}" for f in tb if f.filename.endswith("solution.py")][-4:]
    kind = "runtime"
    if isinstance(exc, kernels.BuildError) or "Error building extension" in message:
        kind = "compile"
    elif isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in message.lower():
        kind = "oom"
    elif "CUDA error" in message or "cudaError" in message or "illegal memory access" in message:
        kind = "cuda"
    log = getattr(exc, "log", "")
    return {"stage": stage, "kind": kind, "message": message[:4000], "frames": frames, "log": log[-20000:]}


def strict_fp32() -> None:
    """Full fp32 math for reference and candidate alike (cuDNN convolutions default to TF32)."""
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def lowered_precision() -> bool:
    return bool(_cudnn_tf32() or _cublas_tf32() or _matmul_precision() != "highest")


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _as_list(out) -> list:
    return list(out) if isinstance(out, tuple | list) else [out]


# the reference runner -------------------------------------------------------------------------------------

def run_reference(job: ChildJob, sock: socket.socket) -> None:
    """Compute the expected outputs, then judge candidate outputs sent by the trusted worker, on the device.

    The expected outputs never leave this process; comparisons run here, next to them (on the GPU when the
    task runs there), so large outputs are not copied to the host.
    """
    from dataclasses import asdict

    from kernelgym.evaluation.compare import compare_trial

    dtype = getattr(torch, job.dtype)
    torch.set_num_threads(job.threads)
    strict_fp32()
    try:
        task = load_module(job.task_source, "kernelgym_task")
        model = build_model(task.Model, task, job.init_seed, dtype, job.device)
        expected = []
        with torch.no_grad():
            for seed, perturbed in zip(job.trial_seeds, job.perturbed):
                inputs = make_inputs(task, seed, perturbed, job.perturb, dtype, job.device)
                expected.append([o for o in _as_list(model(*inputs))])
                _sync(job.device)
        bad = [type(o).__name__ for outs in expected for o in outs if not isinstance(o, torch.Tensor)]
        if bad:
            raise TypeError(f"the reference returned non-tensor outputs ({', '.join(bad)})")
    except BaseException as exc:  # the task itself is broken: report it, the trusted side decides
        protocol.send(sock, "error", error_meta("reference", exc))
        return
    protocol.send(sock, "ready", {"outputs": [len(e) for e in expected], **_roofline_facts(job, task, model, expected)})
    while True:
        kind, meta, blobs = protocol.recv(sock)
        if kind != "compare":
            return
        trial = int(meta["trial"]) if 0 <= int(meta.get("trial", -1)) < len(expected) else 0
        try:
            wanted = expected[trial]
            scale = float(meta.get("scale", 1.0))
            if scale != 1.0:  # a spot check of a timed call: its inputs were this set, scaled
                inputs = make_inputs(task, job.trial_seeds[trial], job.perturbed[trial], job.perturb, dtype, job.device)
                with torch.no_grad():
                    wanted = _as_list(model(*scaled(inputs, scale)))
            actual = [m["error"] if "error" in m else protocol.cuda_tensor_from_wire(m, job.device) if "ipc" in m
                      else protocol.tensor_from_wire(m, b).to(job.device) for m, b in zip(meta["outputs"], blobs)]
            result = compare_trial(trial, job.perturbed[trial], wanted, actual, meta["atol"], meta["rtol"])
            protocol.send(sock, "compared", asdict(result))
        except (protocol.ProtocolError, KeyError, TypeError, ValueError, IndexError) as exc:
            protocol.send(sock, "compared", {"index": trial, "perturbed": job.perturbed[trial], "passed": False,
                                             "message": f"malformed output: {exc}"})


def _roofline_facts(job: ChildJob, task, model, expected) -> dict:
    """FLOPs and minimum bytes of the task (and the machine's peaks when not cached); {} if they fail."""
    if not job.roofline or job.mode != "run":
        return {}
    from dataclasses import asdict

    from kernelgym.evaluation import roofline

    try:
        dtype = getattr(torch, job.dtype)
        inputs = make_inputs(task, job.trial_seeds[0], job.perturbed[0], job.perturb, dtype, job.device)
        cost = roofline.task_cost(model, inputs, expected[0])
        peaks = job.cached_peaks or asdict(roofline.measure_peaks(job.device))
        return {"flops": cost.flops, "min_bytes": cost.min_bytes, "peaks": peaks}
    except Exception:  # a task the counter cannot trace: the result simply has no roofline
        return {}


def run_baseline(job: ChildJob, sock: socket.socket) -> None:
    """Times the reference alone: eager, and torch.compile of it when asked (no candidate involved)."""
    dtype = getattr(torch, job.dtype)
    torch.set_num_threads(job.threads)
    strict_fp32()
    try:
        task = load_module(job.task_source, "kernelgym_task")
        model = build_model(task.Model, task, job.init_seed, dtype, job.device)
        sets = [make_inputs(task, s, p, job.perturb, dtype, job.device)
                for s, p in list(zip(job.trial_seeds, job.perturbed))[:INPUT_SETS_FOR_TIMING]]
        timer = timing_mod.Timer(job.device, job.timing_config.subtract_sync_cost)
        timer.calibrate()
        with torch.no_grad():
            eager = timing_mod.measure_alone(timer, lambda k: model(*sets[k]), len(sets), job.timing_config)
            compiled_ms: list[float] = []
            if job.compile_baseline:
                compiled = torch.compile(model)
                compiled_ms = timing_mod.measure_alone(timer, lambda k: compiled(*sets[k]), len(sets), job.timing_config)
    except BaseException as exc:
        protocol.send(sock, "error", error_meta("baseline", exc))
        return
    protocol.send(sock, "baseline", {"eager_ms": eager, "compile_ms": compiled_ms, "device": _device_name(job.device)})


# the candidate runner -------------------------------------------------------------------------------------

class _Launches:
    """Counts launches of the solution's Triton kernels (the lean C/CUDA loader counts its own calls)."""

    def __init__(self) -> None:
        self.count = 0

    def wrap_triton(self, module) -> None:
        try:
            from triton.runtime.jit import JITFunction
        except Exception:  # Triton missing: nothing to count
            return
        kinds = (JITFunction,)
        try:
            from triton.runtime.interpreter import InterpretedFunction

            kinds = (JITFunction, InterpretedFunction)
        except Exception:
            pass
        for value in list(vars(module).values()):
            target = getattr(value, "fn", None) if not isinstance(value, kinds) else value
            for fn in {id(x): x for x in (value, target) if isinstance(x, kinds)}.values():
                original = fn.run

                def run(*args, _original=original, **kwargs):
                    self.count += 1
                    return _original(*args, **kwargs)

                fn.run = run


def _wait_for_go(sock: socket.socket) -> None:
    kind, _, _ = protocol.recv(sock)
    if kind != "go":
        raise RuntimeError(f"protocol: expected 'go' from the judge, got {kind!r}")


def _ask_worker_to_build(sock: socket.socket, meta: dict):
    """Send a build request to the trusted worker; the path of the finished artifact, or BuildError."""
    from pathlib import Path

    protocol.send(sock, "build", meta)
    kind, reply, _ = protocol.recv(sock)
    if kind != "built":
        raise kernels.BuildError(reply.get("message", "compilation failed"), reply.get("log", ""))
    return Path(reply["path"])


def _install_load_inline_shim(sock: socket.socket) -> None:
    """KernelBench-style solutions call torch's load_inline: route it to the trusted, caching builder."""
    import torch.utils.cpp_extension as cpp_extension

    from kernelgym import torch_ext

    kernels.remote_extension_builder = lambda request: _ask_worker_to_build(
        sock, {"language": "torch_ext", **request.to_meta()})
    cpp_extension.load_inline = torch_ext.load_inline


def run_candidate(job: ChildJob, sock: socket.socket, eval_dir: str) -> None:
    dtype = getattr(torch, job.dtype)
    torch.set_num_threads(job.threads)
    strict_fp32()
    stage = "load"
    try:
        task = load_module(job.task_source, "kernelgym_task")
        reference = None
        timer = None
        pre_ref_times: list[float] = []
        sets = []
        if job.timing:
            # The reference is timed once before any candidate code exists in this process: a candidate that
            # slows torch down at import is caught by comparing with the interleaved times later.
            reference = build_model(task.Model, task, job.init_seed, dtype, job.device)
            timer = timing_mod.Timer(job.device, job.timing_config.subtract_sync_cost)
            sets = [make_inputs(task, s, p, job.perturb, dtype, job.device)
                    for s, p in list(zip(job.trial_seeds, job.perturbed))[:INPUT_SETS_FOR_TIMING]]
            _wait_for_go(sock)  # the reference process has finished with the device
            from kernelgym.workers.locks import device_lock

            with torch.no_grad():
                with device_lock(job.device):  # alone on the device, like the timing itself
                    for k in range(len(sets)):  # a busy device first: its clocks as they will be while timing
                        reference(*sets[k])
                    timer.calibrate()
                    pre_ref_times = timing_mod.measure_alone(
                        timer, lambda k: reference(*sets[k]), len(sets),
                        timing_mod.TimingConfig(trials=20, warmup=2, budget_s=1.0, min_trials=5))
                if job.compile_baseline and job.cached_compile_ms is None:
                    protocol.send(sock, "stage", {"name": "compile_baseline"})
                    compiled = torch.compile(reference)
                    times = timing_mod.measure_alone(timer, lambda k: compiled(*sets[k]), len(sets), job.timing_config)
                    protocol.send(sock, "compile_baseline", {"ms": sorted(times)[len(times) // 2]})
        protocol.send(sock, "stage", {"name": "build"})
        kernels.remote_builder = lambda request: _ask_worker_to_build(
            sock, {"language": request.language, "source": request.source, "flags": list(request.flags)})
        _install_load_inline_shim(sock)
        if job.backend == "triton":
            from kernelgym import triton_build

            triton_build.route_builds_to(lambda request: _ask_worker_to_build(
                sock, {"language": "triton_module", **request.to_meta()}))
        kernels.cuda_compile_only = job.mode == "compile"
        if job.mode == "interpret":
            os.environ["TRITON_INTERPRET"] = "1"
        threads_before = _active_threads()
        os_threads_before = os_threads()
        _WATCHED_CLASSES[:] = [v for v in vars(task).values() if isinstance(v, type) and issubclass(v, torch.nn.Module)]
        integrity = integrity_snapshot()
        solution = load_module(job.solution_source, "solution", os.path.join(eval_dir, "solution.py"))
        protocol.send(sock, "loaded", {})
        if job.mode == "compile":
            protocol.send(sock, "done", {"note": "compiled only: no GPU to run it"})
            return
        stage = "init"
        if not isinstance(getattr(solution, "ModelNew", None), type):
            protocol.send(sock, "error", {"stage": "load", "kind": "contract", "message": "the module defines no class ModelNew", "frames": [], "log": ""})
            return
        launches = _Launches()
        launches.wrap_triton(solution)
        model = build_model(solution.ModelNew, task, job.init_seed, dtype, job.device)
        object.__setattr__(model, "_kernelgym_launches", launches)
        stage = "correctness"
        protocol.send(sock, "stage", {"name": "correctness"})
        keep: list = []  # outputs shared with the judge by CUDA IPC stay alive until it has answered
        with torch.no_grad():
            for i, (seed, perturbed) in enumerate(zip(job.trial_seeds, job.perturbed)):
                inputs = make_inputs(task, seed, perturbed, job.perturb, dtype, job.device)
                snapshot = [_clone(x) if isinstance(x, _plain_tensor) else x for x in inputs]
                calls_before = kernels.KERNEL_STATS.calls + launches.count
                out = model(*inputs)
                _sync(job.device)
                facts = {
                    "own_kernel_calls": kernels.KERNEL_STATS.calls + launches.count - calls_before,
                    "inputs_modified": any(isinstance(a, _plain_tensor) and not _equal(a, b)
                                           for a, b in zip(inputs, snapshot)),
                    "aliases_input": _aliases(out, inputs),
                    "threads_after": _active_threads() - threads_before,
                    "os_threads_extra": os_threads() - os_threads_before,
                    "tampered": tampered(integrity)[:5],
                    "precision_lowered": lowered_precision(),
                }
                metas, blobs = protocol.outputs_to_wire(out, keep)
                protocol.send(sock, "outputs", {"trial": i, "outputs": metas, "facts": facts}, blobs)
        kind, meta, _ = protocol.recv(sock)
        keep.clear()
        if kind != "time" or not job.timing:
            protocol.send(sock, "done")
            return
        stage = "timing"
        protocol.send(sock, "stage", {"name": "timing"})
        _timing(job, sock, task, reference, model, sets, timer, pre_ref_times, integrity)
        if job.profile:
            stage = "profile"
            protocol.send(sock, "stage", {"name": "profile"})

            own = own_kernel_names(solution, job.solution_source)
            from kernelgym.workers.locks import device_lock

            with device_lock(job.device):  # measured alone, like the timing
                profile = _profile_candidate(model, sets[0], job.device, launches, own, warm_inputs=sets[-1])
            protocol.send(sock, "profile", {**profile, "tampered": tampered(integrity)[:5]})
        protocol.send(sock, "done")
    except BaseException as exc:
        protocol.send(sock, "error", error_meta(stage, exc))


def _aliases(out, inputs) -> bool:
    storages = {_storage_ptr(_storage_of(x)) for x in inputs if isinstance(x, _plain_tensor) and _numel(x)}
    return any(isinstance(o, _plain_tensor) and _numel(o) and _storage_ptr(_storage_of(o)) in storages
               for o in _as_list(out))


SPOT_CHECKS = 3


def scaled(inputs: list, scale: float) -> list:
    """Float inputs times `scale` (the same arithmetic in the judge's process and the candidate's)."""
    if scale == 1.0:
        return inputs
    return [x * scale if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]


def _timing(job, sock, task, reference, model, sets, timer, pre_ref_times, integrity) -> None:
    from kernelgym.workers.locks import device_lock

    # Fixed input buffers, rewritten before every timed call: the same addresses with new contents.
    buffers = [_clone(x) if isinstance(x, _plain_tensor) else x for x in sets[0]]

    def prepare(k: int, scale: float) -> None:
        for buffer, value in zip(buffers, scaled(sets[k], scale)):
            if isinstance(buffer, _plain_tensor):
                buffer.copy_(value)

    launches = getattr(model, "_kernelgym_launches", None)
    while True:
        calls_before = kernels.KERNEL_STATS.calls + (launches.count if launches else 0)
        with torch.no_grad(), device_lock(job.device):
            ref_times, cand_times, checks = timing_mod.measure_interleaved(
                timer, lambda k: reference(*buffers), lambda k: model(*buffers), len(sets), job.timing_config,
                prepare=prepare, spot_checks=SPOT_CHECKS)
        own_calls = kernels.KERNEL_STATS.calls + (launches.count if launches else 0) - calls_before
        protocol.send(sock, "timing", {"rounds": [{"ref_ms": ref_times, "cand_ms": cand_times}],
                                       "pre_ref_ms": pre_ref_times, "device": _device_name(job.device),
                                       "sync_cost_ms": timer.sync_cost_ms if job.device.startswith("cuda") else None,
                                       "tampered": tampered(integrity)[:5], "own_kernel_calls": own_calls,
                                       "candidate_calls": len(cand_times) + job.timing_config.warmup})
        kind, _, _ = protocol.recv(sock)
        if kind != "again":
            break
    keep: list = []  # shared outputs stay alive until the judge has compared them
    for check in checks:
        metas, blobs = protocol.outputs_to_wire(check.output, keep)
        protocol.send(sock, "outputs", {"trial": check.input_set, "scale": check.scale, "outputs": metas,
                                        "facts": {}, "spot_check": check.call}, blobs)
        protocol.recv(sock)
        keep.clear()
    # Outputs of fresh calls after timing, with the allocator's free memory poisoned first: a candidate that
    # returns stale buffers (the reference's freed output) is caught.
    with torch.no_grad():
        for k in range(len(sets)):
            _poison(job.device, sets[k])
            out = model(*sets[k])
            _sync(job.device)
            metas, blobs = protocol.outputs_to_wire(out, keep)
            protocol.send(sock, "outputs", {"trial": k, "outputs": metas, "facts": {}, "after_timing": True}, blobs)
            protocol.recv(sock)  # the judge has compared them: the memory may be reused
            keep.clear()


def _poison(device: str, inputs: list) -> None:
    """Overwrite memory the allocator would hand out next with NaN."""
    if device.startswith("cuda"):
        free = torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
        if free > 0:
            torch.empty(free // 4, dtype=torch.float32, device=device).fill_(float("nan"))
        return
    # On the CPU, malloc reuses freed chunks of the same size first: fill chunks of the sizes in play.
    sizes = {x.numel() for x in inputs if isinstance(x, _plain_tensor)} | {1 << 16, 1 << 20}
    for n in sorted(sizes):
        for _ in range(4):
            torch.empty(n, dtype=torch.float32).fill_(float("nan"))


def _device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name()
    import platform

    return f"cpu ({platform.processor() or platform.machine()}), {torch.get_num_threads()} thread(s)"
