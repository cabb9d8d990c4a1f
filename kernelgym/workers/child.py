"""What runs inside the two forked evaluation processes: the reference's side and the candidate's side.

Both sides run the same batch code (`run_batch`), so the fixed cost the trusted clock sees is the same on
each. Nothing here decides anything and nothing here is timed: the worker's clock runs around each batch, the
worker reads the candidate's outputs itself, and the reference process compares them. The candidate's side
may be fully controlled by the candidate; the reference's side never sees candidate code.
"""

from __future__ import annotations

import importlib.util
import mmap
import os
import socket
import sys
import time
import traceback
import types
from dataclasses import dataclass, field

import torch

from kernelgym import kernels
from kernelgym.evaluation import timing as timing_mod
from kernelgym.workers import messages as m
from kernelgym.workers import protocol

ARENA_ALIGN = 64


@dataclass
class ChildJob:
    """What a forked process needs; built by the trusted worker, never by the candidate."""

    task_source: str  # the module at the chosen size
    solution_source: str
    backend: str
    device: str  # "cpu" or "cuda"
    mode: str  # "run", "interpret" (Triton without GPU), "compile" (CUDA without GPU)
    dtype: str
    init_seed: int
    perturb: str
    threads: int = 1
    roofline: bool = True  # the reference process reports the task's FLOPs and bytes (and peaks, if asked)
    cached_peaks: dict | None = None
    timing_config: timing_mod.TimingConfig = field(default_factory=timing_mod.TimingConfig)
    compile_baseline: bool = False
    trial_seeds: list[int] = field(default_factory=list)  # baselines only
    perturbed: list[bool] = field(default_factory=list)
    backward: bool = False  # forward and backward: every call also returns autograd's gradients


# helpers of both sides ---------------------------------------------------------------------------------

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
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)  # noqa: S102 - task code, in its own process
    return module


def make_inputs(task_module, seed: int, perturbed: bool, perturb: str, dtype: torch.dtype,
                device: str) -> list:
    torch.manual_seed(seed)
    with torch.device(device):  # factories allocate on the run's device: no host copy of GBs
        inputs = list(task_module.get_inputs())
    if perturbed and perturb != "none":
        gen = torch.Generator().manual_seed(seed ^ 0x5EED)
        scale = float(torch.empty(()).uniform_(1.5, 4.0, generator=gen))
        # Always a negative shift: all-positive inputs (torch.rand) must reach negative values, or a kernel
        # that ignores the negative branch (ReLU for LeakyReLU) would pass.
        shift = 0.0 if perturb == "positive" else float(torch.empty(()).uniform_(-1.5, -0.25, generator=gen))
        inputs = [x * scale + shift if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                  for x in inputs]
    # Integer inputs (targets, indices) keep their dtype whatever the run's float dtype is.
    return [x.to(device=device, dtype=dtype) if isinstance(x, torch.Tensor) and x.is_floating_point()
            else x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]


def build_model(cls, init_args: list, seed: int, dtype: torch.dtype, device: str):
    torch.manual_seed(seed)
    return cls(*init_args).to(device=device, dtype=dtype)


def error_meta(stage: str, exc: BaseException) -> m.Failed:
    message = f"{type(exc).__name__}: {exc}"
    tb = traceback.extract_tb(exc.__traceback__)
    # The candidate's own frames: the lines an agent can act on.
    frames = [f"  line {f.lineno} in {f.name}: {f.line}" for f in tb
              if f.filename.endswith("solution.py")][-4:]
    kind = "runtime"
    if isinstance(exc, kernels.BuildError) or "Error building extension" in message:
        kind = "compile"
    elif (isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in message.lower()
          or _oom_report_failed(message)):
        kind = "oom"
    elif "CUDA error" in message or "cudaError" in message or "illegal memory access" in message:
        kind = "cuda"
    return m.Failed(stage, kind, message[:4000], frames, getattr(exc, "log", "")[-20000:])


def _oom_report_failed(message: str) -> bool:
    """PyTorch's caching allocator asks NVML who holds the memory only when an allocation failed; where NVML
    cannot start (seen in the candidate's namespaces on the H200 host: an INTERNAL ASSERT on nvmlInit) that
    assert replaces the out-of-memory error it was writing."""
    return "CUDACachingAllocator" in message and "nvmlInit" in message


def strict_fp32() -> None:
    """Full-precision math for reference and candidate alike (cuDNN convolutions default to TF32; half
    matmuls may reduce in half precision)."""
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False


def lowered_precision(dtype: str = "float32") -> bool:
    """Whether a precision flag that matters for the run's dtype was switched on."""
    matmul = torch.backends.cuda.matmul
    if dtype == "float16":
        return bool(matmul.allow_fp16_reduced_precision_reduction)
    if dtype == "bfloat16":
        return bool(matmul.allow_bf16_reduced_precision_reduction)
    return bool(torch.backends.cudnn.allow_tf32 or matmul.allow_tf32
                or torch.get_float32_matmul_precision() != "highest")


def as_list(out) -> list:
    return list(out) if isinstance(out, tuple | list) else [out]


def value_to_wire(value) -> dict:
    if isinstance(value, torch.Tensor):
        meta, data = protocol.tensor_to_wire(value)
        return {"tensor": meta, "hex": bytes(data).hex()}
    if isinstance(value, bool | int | float | str) or value is None:
        return {"value": value}
    if isinstance(value, list | tuple):
        return {"list": [value_to_wire(v) for v in value]}
    raise TypeError(f"get_init_inputs() returned a {type(value).__name__}")


def value_from_wire(item: dict):
    if "tensor" in item:
        return protocol.tensor_from_wire(item["tensor"], bytearray.fromhex(item["hex"])).clone()
    if "list" in item:
        return [value_from_wire(v) for v in item["list"]]
    return item.get("value")


# the batch: identical on both sides ------------------------------------------------------------------------

def map_arena(fd: int, layout: list[list[dict]]) -> tuple[mmap.mmap | None, list[list]]:
    """Input sets from a sealed memfd, mapped copy-on-write: writes stay private, the arena stays pristine."""
    size = os.fstat(fd).st_size
    # Not prefaulted: MAP_POPULATE measured at about 7 ms for 4 MB here, while faulting the pages in as the
    # kernel reads them costs next to nothing (both sides pay it alike).
    flags = mmap.MAP_PRIVATE
    arena = mmap.mmap(fd, size, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE) if size else None
    os.close(fd)
    calls = []
    for items in layout:
        inputs = []
        for item in items:
            if "offset" in item:
                dtype = getattr(torch, item["dtype"])
                count = 1
                for s in item["shape"]:
                    count *= int(s)
                nbytes = count * torch.empty((), dtype=dtype).element_size()
                flat = torch.frombuffer(arena, dtype=torch.uint8, count=nbytes, offset=int(item["offset"])) \
                    if nbytes else torch.empty(0, dtype=torch.uint8)
                inputs.append(flat.view(dtype).reshape(item["shape"]))
            else:
                inputs.append(item.get("value"))
        calls.append(inputs)
    return arena, calls


def map_ipc(ipc: list[list[dict]], device: str) -> list[list]:
    return [[protocol.cuda_tensor_from_wire(item, device) if "ipc" in item else item.get("value")
             for item in items]
            for items in ipc]


class BackwardPass:
    """Backward tasks: each input set ends with the upstream gradients and their count; a call returns the
    forward's outputs, then the gradients of the float inputs, then those of the parameters (in order)."""

    def __init__(self, count=lambda: 0):
        self.count = count  # the solution's own kernel calls so far
        self.kernel_calls = 0  # of those, made while autograd ran the backward

    def __call__(self, model, args: list) -> list:
        upstream_count = int(args[-1])
        upstream = args[len(args) - 1 - upstream_count:-1]
        leaves = [x.detach().requires_grad_() if _is_float(x) else x
                  for x in args[:len(args) - 1 - upstream_count]]
        wrt = [x for x in leaves if _is_float(x)] + list(model.parameters())
        with torch.enable_grad():
            outs = as_list(model(*leaves))
            detached = [k for k, o in enumerate(outs) if isinstance(o, torch.Tensor) and o.grad_fn is None
                        and not o.requires_grad]
            if detached:
                raise RuntimeError(f"output {detached[0]} is not attached to autograd: a backward task's "
                                   "ModelNew returns outputs autograd can differentiate (a "
                                   "torch.autograd.Function whose backward runs your kernels)")
            before = self.count()
            grads = torch.autograd.grad(outs, wrt, upstream, allow_unused=True, materialize_grads=True)
            self.kernel_calls += self.count() - before
        # A gradient that is the upstream gradient itself (an identity's backward, autograd's own included)
        # is copied on either side alike: an output in an input's memory is a rule of its own.
        given = {x.untyped_storage().data_ptr() for x in args if isinstance(x, torch.Tensor)}
        grads = [g.clone() if g.untyped_storage().data_ptr() in given else g for g in grads]
        return [o.detach() if isinstance(o, torch.Tensor) else o for o in outs] + grads


def _is_float(x) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point()


def upstream_grads(seed: int, shapes: list, dtype: torch.dtype, device: str) -> list:
    """The upstream gradient of each output, drawn from the trusted side's seed, and their count."""
    # Drawn on the run's device: drawn on the host, a GPU-sized gradient took 0.3 s a call, and a timed
    # batch of 64 calls held the GPU's timing slot for seconds.
    gen = torch.Generator(device=device).manual_seed(seed ^ 0xBAC4)
    return [torch.randn(list(shape), generator=gen, device=device).to(dtype=dtype) for shape in shapes] + \
        [len(shapes)]


def run_batch(model, calls: list[list], device: str, backward: BackwardPass | None = None) -> list:
    """The timed work: forward (and, for a backward task, autograd's backward) once per input set, then wait
    for the device. Nothing else."""
    outputs = []
    if backward is not None:
        for inputs in calls:
            outputs.append(backward(model, inputs))
    else:
        with torch.no_grad():
            for inputs in calls:
                outputs.append(model(*inputs))
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return outputs


def describe_outputs(outputs: list, device: str, keep: list, export: bool = True,
                     calls: list[list] | None = None) -> list[list[dict]]:
    """Where each output lies, for the trusted side to read: an address (CPU) or an IPC handle (GPU).
    The reference's side does not export (nobody maps its outputs; unconsumed exports pile up in torch).
    On the GPU an output that is an input (or a view of one) is said so: torch cannot re-export memory it
    mapped from another process, and the honest answer is the rule, not torch's error. (The trusted side
    also compares handles, for a candidate that would not say so.)"""
    described = []
    for index, out in enumerate(outputs):
        items = []
        input_storages = {x.untyped_storage().data_ptr() for x in (calls[index] if calls else [])
                          if isinstance(x, torch.Tensor) and x.is_cuda}
        for item in as_list(out):
            if type(item) is not torch.Tensor:
                what = "a subclass of Tensor" if isinstance(item, torch.Tensor) else "not a tensor"
                items.append({"error": f"output is a {type(item).__name__}, {what}"})
                continue
            if item.is_cuda and item.untyped_storage().data_ptr() in input_storages:
                items.append({"error": "an output shares memory with an input", "aliases_input": True})
                continue
            dense = item if item.is_contiguous() else item.contiguous()
            keep.append(dense)
            wire = {"dtype": str(item.dtype).removeprefix("torch."), "shape": list(item.shape)}
            if dense.is_cuda and dense.numel() and export:
                wire.update(protocol.cuda_tensor_to_wire(dense, keep))
            else:
                wire.update(ptr=dense.data_ptr(), nbytes=dense.numel() * dense.element_size())
            items.append(wire)
        described.append(items)
    return described


def own_calls(launches) -> int:
    return kernels.KERNEL_STATS.calls + launches.count


# the reference's side ----------------------------------------------------------------------------------

class _ReferenceSide:
    def __init__(self, job: ChildJob, sock: socket.socket):
        self.job, self.sock = job, sock
        self.dtype = getattr(torch, job.dtype)
        self.batches: dict[int, dict] = {}  # batch -> inputs (and outputs once run)
        self.backward = BackwardPass() if job.backward else None
        self.output_shapes: list = []  # the forward's, for the upstream gradients of a backward task
        self.labels: list[str] | None = None
        self.precision_checks = 8  # half dtypes: calls still to check against a float32 run
        self.model_fp32 = None

    def input_set(self, seed: int, perturbed: bool) -> list:
        job = self.job
        inputs = make_inputs(self.task, seed, perturbed, job.perturb, self.dtype, job.device)
        if self.backward is None:
            return inputs
        return inputs + upstream_grads(seed, self.output_shapes, self.dtype, job.device)

    def start(self) -> bool:
        job = self.job
        torch.set_num_threads(job.threads)
        strict_fp32()
        startup = timing_mod.Laps()
        part = startup.lap
        try:
            self.task = load_module(job.task_source, "kernelgym_task")
            torch.manual_seed(job.init_seed)
            self.init_args = list(self.task.get_init_inputs())
            part("task")
            self.model = build_model(self.task.Model, self.init_args, job.init_seed, self.dtype, job.device)
            part("model")  # on a GPU, the CUDA context's creation is in here
            probe = make_inputs(self.task, job.init_seed, False, job.perturb, self.dtype, job.device)
            with torch.no_grad():
                out = as_list(self.model(*probe))
            bad = [type(o).__name__ for o in out if not isinstance(o, torch.Tensor)]
            if bad:
                raise TypeError(f"the reference returned non-tensor outputs ({', '.join(bad)})")
            if self.backward is not None:
                self.output_shapes = [list(o.shape) for o in out]
                self.labels = gradient_labels(self.model, probe, len(out))
                probe = self.input_set(job.init_seed, False)
                out = run_batch(self.model, [probe], job.device, self.backward)[0]
            part("probe")
            facts = _roofline_facts(job, self.model, probe, out)
            part("roofline")
            ready = m.Ready(init_args=[value_to_wire(v) for v in self.init_args], outputs_per_call=len(out),
                            input_bytes=sum(x.numel() * x.element_size() for x in probe
                                            if isinstance(x, torch.Tensor)),
                            output_bytes=sum(o.numel() * o.element_size() for o in out),
                            device_memory_bytes=_free_device_memory(job.device), startup_s=startup.seconds,
                            **facts)
            del probe, out
        except BaseException as exc:  # noqa: BLE001 - the task itself is broken: the trusted side decides
            m.send(self.sock, error_meta("reference", exc))
            return False
        m.send(self.sock, ready)
        return True

    def make_inputs(self, msg: m.MakeInputs) -> None:
        job = self.job
        sets = [self.input_set(s, p) for s, p in zip(msg.seeds, msg.perturbed)]
        entry = {"sets": sets, "keep": [], "outputs": None}
        self.batches[msg.batch] = entry
        if job.device.startswith("cuda"):
            torch.cuda.synchronize()
            # Private copies: the candidate maps these sets and could write into them (checked after).
            entry["pristine"] = [[x.clone() if isinstance(x, torch.Tensor) else x for x in s] for s in sets]
            ipc = [[{**protocol.cuda_tensor_to_wire(x, entry["keep"]),
                     "dtype": str(x.dtype).removeprefix("torch."),
                     "shape": list(x.shape)} if isinstance(x, torch.Tensor) and x.numel()
                    else {"value": _plain(x)}
                    for x in s] for s in sets]
            m.send(self.sock, m.Inputs(msg.batch, ipc=ipc))
            return
        fd, layout = _write_arena(sets)
        entry["fd_layout"] = layout
        try:
            m.send(self.sock, m.Inputs(msg.batch, layout=layout), fds=[fd])
        finally:
            os.close(fd)

    def run(self, msg: m.RunBatch, fds: list[int]) -> None:
        device = self.job.device
        if msg.map_only:
            m.send(self.sock, m.BatchDone(msg.batch))
            return
        arena = None
        if fds:
            arena, calls = map_arena(fds[0], msg.layout)
        else:
            calls = self.batches[msg.batch]["sets"] if msg.batch in self.batches else []  # [] calibrates
        outputs = run_batch(self.model, calls, device, self.backward)
        keep: list = []
        described = describe_outputs(outputs, device, keep, export=False)
        m.send(self.sock, m.BatchDone(msg.batch, described, [], 0, lowered_precision(self.job.dtype)))
        entry = self.batches.get(msg.batch)
        if entry is not None and entry["outputs"] is None:
            entry["outputs"] = [as_list(out) for out in outputs]
        del arena, calls

    def compare(self, msg: m.Compare, fds: list[int]) -> None:
        """Every call of the batch, the last first (work still in flight at 'done' shows there); the answer
        names the first call that failed."""
        from dataclasses import asdict

        try:
            readback = _map_readback(fds)
        except (OSError, ValueError):
            readback = None  # every output then lies outside the buffer: a failed check, not a crash
        entry = self.batches.get(msg.batch)
        if entry is None or len(msg.outputs) != len(entry["sets"]):
            failed = {"index": 0, "perturbed": False, "passed": False,
                      "message": f"{len(msg.outputs)} outputs for the batch's calls"}
            m.send(self.sock, m.Compared(failed, False, 0, 0))
            return
        last = len(msg.outputs) - 1
        # GPU: the last call's outputs copied before anything else, and the time that copy was complete: what
        # a candidate can leave running after 'done' is bounded by this lag, not by the comparisons' length.
        snapshot = self._snapshot(msg.outputs[last]) if last >= 0 and "cuda" in self.job.device else None
        checked_ns = time.perf_counter_ns() if snapshot is not None else 0
        passed = {"index": -1, "perturbed": False, "passed": True}
        if self._all_calls_pass(msg, readback, snapshot):
            m.send(self.sock, m.Compared(passed, False, -1, checked_ns))
            return
        for call in reversed(range(last + 1)):  # one call at a time: which failed, and why
            trial, modified = self._compare_call(msg, call, readback, snapshot if call == last else None)
            checked_ns = checked_ns or time.perf_counter_ns()
            if modified or not trial.passed:
                m.send(self.sock, m.Compared(asdict(trial), modified, call, checked_ns))
                return
        m.send(self.sock, m.Compared(passed, False, -1, checked_ns))

    def _all_calls_pass(self, msg: m.Compare, readback, snapshot: list | None) -> bool:
        """The common case, every call within tolerance and every input unwritten, decided by one readback of
        flags computed on the device (a wait per output and per input held the GPU's timing slot for most of
        its time). False sends the batch through the call-by-call comparison, which decides and names."""
        from kernelgym.evaluation.compare import close_flag

        entry = self.batches.get(msg.batch) or {}
        outputs, sets = entry.get("outputs") or [], entry.get("sets") or []
        if len(outputs) != len(msg.outputs) or (
                self.precision_checks > 0 and self.dtype in (torch.float16, torch.bfloat16)):
            return False  # half dtypes: the first calls are also checked against a float32 run, one by one
        last, flags, held = len(msg.outputs) - 1, [], []  # held: mapped outputs stay mapped until read
        try:
            for call in range(last + 1):
                actual = snapshot if call == last and snapshot is not None else \
                    [self._actual(meta, readback) for meta in msg.outputs[call]]
                held.append(actual)
                if len(actual) != len(outputs[call]):
                    return False
                for want, got in zip(outputs[call], actual):
                    flag = close_flag(want, got, msg.atol, msg.rtol)
                    if flag is None:
                        return False
                    flags.append(flag)
                if "pristine" in entry:
                    flags += [torch.eq(a, b).all() for a, b in zip(sets[call], entry["pristine"][call])
                              if isinstance(a, torch.Tensor) and a.numel()]
            return not flags or bool(torch.stack(flags).all())
        except (protocol.ProtocolError, KeyError, TypeError, ValueError, IndexError, RuntimeError,
                MemoryError):
            return False

    def _snapshot(self, metas: list[dict]) -> list | None:
        try:
            copies = [value.clone() if isinstance(value, torch.Tensor) else value
                      for value in (self._actual(meta, None) for meta in metas)]
            torch.cuda.synchronize()
            return copies
        except (protocol.ProtocolError, KeyError, TypeError, ValueError, IndexError, RuntimeError):
            return None  # the comparison below reports what is wrong with these outputs

    def _compare_call(self, msg: m.Compare, call: int, readback, actual: list | None = None) -> tuple:
        from kernelgym.evaluation.compare import compare_trial
        from kernelgym.evaluation.result import TrialResult

        entry = self.batches.get(msg.batch) or {}
        outputs = entry.get("outputs") or []
        wanted = outputs[call] if call < len(outputs) else None
        try:
            if wanted is None:
                raise ValueError("no reference outputs for that call")
            if actual is None:
                actual = [self._actual(meta, readback) for meta in msg.outputs[call]]
            trial = compare_trial(call, False, wanted, actual, msg.atol, msg.rtol, self.labels)
            if trial.passed and self.precision_checks > 0 and self.dtype in (torch.float16, torch.bfloat16):
                self.precision_checks -= 1
                trial = self._precision_kept(entry["sets"][call], wanted, actual, trial)
            modified = "pristine" in entry and any(
                isinstance(a, torch.Tensor) and not torch.equal(a, b)
                for a, b in zip(entry["sets"][call], entry["pristine"][call]))
            return trial, modified
        except (protocol.ProtocolError, KeyError, TypeError, ValueError, IndexError, RuntimeError,
                MemoryError) as exc:
            return TrialResult(call, False, False, f"malformed output: {str(exc)[:300]}"), False

    def _precision_kept(self, inputs: list, wanted: list, actual: list, trial):
        """A half-precision run's outputs against the same computation in float32: the candidate's mean error
        may be a few times the reference's own, not the error of a type narrower than the task's."""
        import copy

        from kernelgym.evaluation.compare import precision_lost

        if self.model_fp32 is None:
            self.model_fp32 = copy.deepcopy(self.model).float()
        wide = [x.float() if _is_float(x) else x for x in inputs]
        backward = BackwardPass() if self.backward else None
        golden = run_batch(self.model_fp32, [wide], self.job.device, backward)
        return precision_lost(trial, as_list(golden[0]), wanted, actual, self.dtype, self.labels)

    def _actual(self, meta: dict, readback):
        if "error" in meta:
            return str(meta["error"])
        if "ipc" in meta:
            return protocol.cuda_tensor_from_wire(meta, self.job.device)
        return protocol.tensor_in_buffer(meta, readback).to(self.job.device)


def _map_readback(fds: list[int]):
    """The worker's readback memfd, mapped copy-on-write (a comparison never writes; no copy is made)."""
    if not fds:
        return None
    try:
        size = os.fstat(fds[0]).st_size
        return mmap.mmap(fds[0], size, flags=mmap.MAP_PRIVATE,
                         prot=mmap.PROT_READ | mmap.PROT_WRITE) if size else None
    finally:
        for fd in fds:
            os.close(fd)


def _free_device_memory(device: str) -> int:
    if not device.startswith("cuda"):
        return 0
    free, _ = torch.cuda.mem_get_info()
    return int(free)


def _plain(x):
    return x if isinstance(x, bool | int | float | str) or x is None else repr(x)


def _write_arena(sets: list[list]) -> tuple[int, list[list[dict]]]:
    """The sets in one sealed memfd: nobody, the candidate included, can change them once written."""
    import fcntl

    layout, placed, offset = [], [], 0
    for inputs in sets:
        items = []
        for x in inputs:
            if isinstance(x, torch.Tensor):
                nbytes = x.numel() * x.element_size()
                items.append({"offset": offset, "dtype": str(x.dtype).removeprefix("torch."),
                              "shape": list(x.shape)})
                placed.append((offset, nbytes, x))
                offset += (nbytes + ARENA_ALIGN - 1) // ARENA_ALIGN * ARENA_ALIGN
            else:
                items.append({"value": _plain(x)})
        layout.append(items)
    fd = os.memfd_create("kernelgym-inputs", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, offset)
    for at, nbytes, x in placed:  # straight from the tensor's memory (pwrite: half the cost of a mapping)
        if nbytes:
            data = x.detach().contiguous().reshape(-1).view(torch.uint8).numpy()
            written = 0
            while written < nbytes:
                written += os.pwrite(fd, data[written:], at + written)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    readonly = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY)
    os.close(fd)
    return readonly, layout


def gradient_labels(model, inputs: list, outputs: int) -> list[str]:
    """How a backward task's outputs are named in a mismatch: the forward's, then each gradient's."""
    labels = [f"output {k}" if outputs > 1 else "output" for k in range(outputs)]
    labels += [f"gradient of input {k}" for k, x in enumerate(inputs) if _is_float(x)]
    return labels + [f"gradient of parameter {name!r}" for name, _ in model.named_parameters()]


def _roofline_facts(job: ChildJob, model, inputs, outputs) -> dict:
    """FLOPs and minimum bytes of the task (and the machine's peaks when not cached); {} if they fail."""
    if not job.roofline or job.mode != "run":
        return {}
    from dataclasses import asdict

    from kernelgym.evaluation import roofline

    try:
        backward_inputs = int(inputs[-1]) + 1 if job.backward else 0  # the upstream gradients and their count
        cost = roofline.task_cost(model, inputs, outputs, backward_inputs)
        peaks = job.cached_peaks or asdict(roofline.measure_peaks(job.device, job.dtype))
        return {"flops": cost.flops, "min_bytes": cost.min_bytes, "peaks": peaks}
    except Exception:  # noqa: BLE001 - a task the counter cannot trace: the result simply has no roofline
        return {}


def run_reference(job: ChildJob, sock: socket.socket) -> None:
    side = _ReferenceSide(job, sock)
    if not side.start():
        return
    while True:
        msg, _, fds = m.receive(sock)
        if isinstance(msg, m.MakeInputs):
            side.make_inputs(msg)
        elif isinstance(msg, m.RunBatch):
            side.run(msg, fds)
        elif isinstance(msg, m.Compare):
            side.compare(msg, fds)
        elif isinstance(msg, m.Release):
            side.batches.pop(msg.batch, None)
        else:
            return


def _baseline_call(job: ChildJob, model, sets: list[list], dtype: torch.dtype):
    """One timed call of the reference alone: forward, or forward and backward for a backward task."""
    if not job.backward:
        return lambda k: model(*sets[k])
    with torch.no_grad():
        shapes = [list(o.shape) for o in as_list(model(*sets[0]))]
    for k, seed in enumerate(job.trial_seeds):
        sets[k] = sets[k] + upstream_grads(seed, shapes, dtype, job.device)
    backward = BackwardPass()
    return lambda k: backward(model, sets[k])


def run_baseline(job: ChildJob, sock: socket.socket) -> None:
    """Times the reference alone: eager, and torch.compile of it when asked (no candidate involved)."""
    dtype = getattr(torch, job.dtype)
    torch.set_num_threads(job.threads)
    strict_fp32()
    try:
        task = load_module(job.task_source, "kernelgym_task")
        torch.manual_seed(job.init_seed)
        model = build_model(task.Model, list(task.get_init_inputs()), job.init_seed, dtype, job.device)
        sets = [make_inputs(task, s, p, job.perturb, dtype, job.device)
                for s, p in zip(job.trial_seeds, job.perturbed)]
        call = _baseline_call(job, model, sets, dtype)
        timer = timing_mod.Timer(job.device, job.timing_config.subtract_sync_cost)
        timer.calibrate()
        with torch.no_grad():
            eager = timing_mod.measure_alone(timer, call, len(sets), job.timing_config)
            compiled_ms: list[float] = []
            if job.compile_baseline:
                compiled = torch.compile(model)
                compiled_ms = timing_mod.measure_alone(timer, lambda k: compiled(*sets[k]), len(sets),
                                                       job.timing_config)
    except BaseException as exc:  # noqa: BLE001 - reported to the trusted side, which decides
        protocol.send(sock, "error", {"message": f"{type(exc).__name__}: {exc}"[:2000]})
        return
    protocol.send(sock, "baseline", {"eager_ms": eager, "compile_ms": compiled_ms})


# the candidate's side ------------------------------------------------------------------------------------

class _Launches:
    """Counts launches of the solution's Triton kernels (the native loaders count their own calls)."""

    def __init__(self) -> None:
        self.count = 0

    def wrap_triton(self, module) -> None:
        try:
            from triton.runtime.jit import JITFunction
        except Exception:  # noqa: BLE001 - Triton missing: nothing to count
            return
        kinds: tuple = (JITFunction,)
        try:
            from triton.runtime.interpreter import InterpretedFunction

            kinds = (JITFunction, InterpretedFunction)
        except ImportError:  # an older Triton without the interpreter: compiled kernels only
            pass
        for value in list(vars(module).values()):
            target = getattr(value, "fn", None) if not isinstance(value, kinds) else value
            for fn in {id(x): x for x in (value, target) if isinstance(x, kinds)}.values():
                original = fn.run

                def run(*args, _original=original, **kwargs):
                    self.count += 1
                    return _original(*args, **kwargs)

                fn.run = run


def _ask_worker_to_build(sock: socket.socket, request: dict):
    """Send a build request to the trusted worker; the path of the finished artifact, or BuildError."""
    from pathlib import Path

    m.send(sock, m.Build(request))
    reply, _, _ = m.receive(sock)
    if not isinstance(reply, m.Built):
        raise kernels.BuildError(getattr(reply, "message", "compilation failed"), getattr(reply, "log", ""))
    return Path(reply.path)


def _route_builds(job: ChildJob, sock: socket.socket) -> None:
    """Every compiler run goes to the trusted worker; this process only loads what it built."""
    from torch.utils import cpp_extension

    from kernelgym.build import torch_ext

    kernels.remote_builder = lambda r: _ask_worker_to_build(
        sock, {"language": r.language, "source": r.source, "flags": list(r.flags)})
    kernels.remote_extension_builder = lambda r: _ask_worker_to_build(sock,
                                                                      {"language": "torch_ext",
                                                                       **r.to_meta()})
    cpp_extension.load_inline = torch_ext.load_inline
    cpp_extension.load = torch_ext.load
    if job.backend == "triton":
        from kernelgym.build import triton_build

        triton_build.route_builds_to(lambda r: _ask_worker_to_build(sock,
                                                                    {"language": "triton_module",
                                                                     **r.to_meta()}))
    kernels.cuda_compile_only = job.mode == "compile"
    if job.mode == "interpret":
        os.environ["TRITON_INTERPRET"] = "1"


class _CandidateSide:
    def __init__(self, job: ChildJob, sock: socket.socket, eval_dir: str):
        self.job, self.sock, self.eval_dir = job, sock, eval_dir
        self.launches = _Launches()
        self.kept: dict[int, list] = {}  # batch -> its outputs and mappings, alive until Release
        self.mapped: dict[int, list] = {}
        self.stage = "load"
        self.backward = BackwardPass(lambda: own_calls(self.launches)) if job.backward else None

    def load(self) -> bool:
        job = self.job
        torch.set_num_threads(job.threads)
        strict_fp32()
        if job.device.startswith("cuda"):
            # The CUDA context first: mapping the reference's inputs (CUDA IPC) in a process without one
            # crashes, and a ModelNew without parameters would never create it.
            torch.empty(1, device=job.device)
        _route_builds(job, self.sock)
        self.solution = load_module(job.solution_source, "solution",
                                    os.path.join(self.eval_dir, "solution.py"))
        if not isinstance(getattr(self.solution, "ModelNew", None), type):
            m.send(self.sock, m.Failed("load", "contract", "the module defines no class ModelNew"))
            return False
        self.launches.wrap_triton(self.solution)
        m.send(self.sock, m.Loaded())
        return job.mode != "compile"

    def construct(self, msg: m.Construct) -> None:
        self.stage = "init"
        args = [value_from_wire(v) for v in msg.init_args]
        self.model = build_model(self.solution.ModelNew, args, msg.init_seed, getattr(torch, self.job.dtype),
                                 self.job.device)
        m.send(self.sock, m.Constructed())

    def run(self, msg: m.RunBatch, fds: list[int]) -> None:
        self.stage = "forward"
        device = self.job.device
        calls_before = own_calls(self.launches)
        keep: list = []
        if msg.map_only:  # GPU: map the reference's input sets now, outside the timed batch
            self.mapped[msg.batch] = map_ipc(msg.ipc, device)
            m.send(self.sock, m.BatchDone(msg.batch))
            return
        if fds:
            arena, calls = map_arena(fds[0], msg.layout)
            keep.append(arena)
        else:
            calls = self.mapped.get(msg.batch) or map_ipc(msg.ipc, device)
        profile: dict = {}
        backward_before = self.backward.kernel_calls if self.backward else 0
        if msg.profile:
            from kernelgym.evaluation.profile import own_kernel_names, profile_batch

            own = own_kernel_names(self.solution, self.job.solution_source)
            outputs, profile = profile_batch(lambda: run_batch(self.model, calls, device, self.backward),
                                             device, self.launches, own)
        else:
            outputs = run_batch(self.model, calls, device, self.backward)
        described = describe_outputs(outputs, device, keep, calls=calls)
        keep += [outputs, calls]
        self.kept[msg.batch] = keep
        backward_calls = self.backward.kernel_calls - backward_before if self.backward else -1
        m.send(self.sock, m.BatchDone(msg.batch, described, [], own_calls(self.launches) - calls_before,
                                      lowered_precision(self.job.dtype), profile, backward_calls))


def run_candidate(job: ChildJob, sock: socket.socket, eval_dir: str) -> None:
    side = _CandidateSide(job, sock, eval_dir)
    try:
        if not side.load():
            return
        while True:
            msg, _, fds = m.receive(sock)
            if isinstance(msg, m.Construct):
                side.construct(msg)
            elif isinstance(msg, m.RunBatch):
                side.run(msg, fds)
            elif isinstance(msg, m.Release):
                side.kept.pop(msg.batch, None)
                side.mapped.pop(msg.batch, None)
            else:
                return
    except BaseException as exc:  # noqa: BLE001 - reported to the trusted side, which decides
        m.send(sock, error_meta(side.stage, exc))
