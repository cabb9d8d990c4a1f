"""The reference's process: the task's Model, the input sets, the expected outputs and the comparison.

It is trusted and never sees candidate code: it makes every input set from seeds the worker draws, runs
the reference on them, and compares the outputs the worker read from the candidate with its own.
"""

from __future__ import annotations

import os
import socket
import time

import torch

from kernelgym.evaluation import timing as timing_mod
from kernelgym.workers import messages as m
from kernelgym.workers import protocol
from kernelgym.workers.child import (
    ARENA_ALIGN,
    BackwardPass,
    ChildJob,
    as_list,
    build_model,
    describe_outputs,
    error_meta,
    is_float,
    load_module,
    lowered_precision,
    make_inputs,
    map_arena,
    run_batch,
    strict_fp32,
    upstream_grads,
    value_to_wire,
)
from kernelgym.workers.readback import map_readback


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
        self.input_pool = None  # GPU: where the buffers the candidate maps are allocated, and nothing else

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
            m.send(self.sock, m.InitArgs([value_to_wire(v) for v in self.init_args]))
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
            ready = m.Ready(outputs_per_call=len(out),
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
            # The reference runs on `sets`, which never leave this process. The candidate maps `shared`, empty
            # until FillInputs (it is frozen by then), and may write into it: checked against `pristine`.
            entry["pristine"] = [[x.clone() if isinstance(x, torch.Tensor) else x for x in s] for s in sets]
            entry["shared"] = self.shared_buffers(sets)
            ipc = [[{**protocol.cuda_tensor_to_wire(x, entry["keep"]),
                     "dtype": str(x.dtype).removeprefix("torch."),
                     "shape": list(x.shape)} if isinstance(x, torch.Tensor) and x.numel()
                    else {"value": _plain(x)}
                    for x in s] for s in entry["shared"]]
            m.send(self.sock, m.Inputs(msg.batch, ipc=ipc))
            return
        fd, layout = _write_arena(sets)
        entry["fd_layout"] = layout
        try:
            m.send(self.sock, m.Inputs(msg.batch, layout=layout), fds=[fd])
        finally:
            os.close(fd)

    def shared_buffers(self, sets: list[list]) -> list[list]:
        """Empty buffers shaped like the sets' tensors, for the candidate to map. They come from a memory pool
        of their own: an IPC handle opens the whole allocation its tensor lies in, and one shared with the
        private sets or the expected outputs would let the candidate read those through it."""
        if self.input_pool is None:
            self.input_pool = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(self.input_pool):
            return [[torch.empty(x.shape, dtype=x.dtype, device=x.device) if isinstance(x, torch.Tensor)
                     else x for x in s] for s in sets]

    def fill_inputs(self, msg: m.FillInputs) -> None:
        entry = self.batches[msg.batch]
        for pristine, shared in zip(entry["pristine"], entry["shared"]):
            for x, y in zip(pristine, shared):
                if isinstance(x, torch.Tensor):
                    y.copy_(x)
        torch.cuda.synchronize()
        m.send(self.sock, m.InputsFilled(msg.batch))

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
            readback = map_readback(fds)
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
        outputs, shared = entry.get("outputs") or [], entry.get("shared") or []
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
                    flags += [torch.eq(a, b).all() for a, b in zip(shared[call], entry["pristine"][call])
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
            if not trial.passed and trial.mismatch_fraction is not None:
                trial = self._off_the_discontinuities(entry["sets"][call], wanted, actual, msg, trial)
            if trial.passed and self.precision_checks > 0 and self.dtype in (torch.float16, torch.bfloat16):
                self.precision_checks -= 1
                trial = self._precision_kept(entry["sets"][call], wanted, actual, trial)
            modified = "pristine" in entry and any(
                isinstance(a, torch.Tensor) and not torch.equal(a, b)
                for a, b in zip(entry["shared"][call], entry["pristine"][call]))
            return trial, modified
        except (protocol.ProtocolError, KeyError, TypeError, ValueError, IndexError, RuntimeError,
                MemoryError) as exc:
            return TrialResult(call, False, False, f"malformed output: {str(exc)[:300]}"), False

    def _off_the_discontinuities(self, inputs: list, wanted: list, actual: list, msg: m.Compare, trial):
        """Passed when every output the candidate got wrong is one the reference itself computes otherwise at
        inputs perturbed at rounding level (compare.perturbed_at_rounding): the same computation summed in
        another order may honestly land there (in CI a Linear+ReLU backward missed on one gradient row).
        Else the trial of the first output that is wrong beyond such places."""
        from kernelgym.evaluation.compare import compare_trial, first_uncovered, perturbed_at_rounding
        from kernelgym.evaluation.result import TrialResult

        try:
            near = run_batch(self.model, perturbed_at_rounding(inputs), self.job.device, self.backward)
            k = first_uncovered([wanted] + [as_list(out) for out in near], actual, msg.atol, msg.rtol)
        # e.g. no room for the extra runs: the miss stands as the comparison found it
        except (RuntimeError, ValueError, TypeError, MemoryError):
            return trial
        if k is None:
            return TrialResult(trial.index, False, True, "outputs on a discontinuity took the other branch")
        label = self.labels[k] if self.labels and k < len(self.labels) else \
            f"output {k}" if len(wanted) > 1 else "output"
        return compare_trial(trial.index, False, [wanted[k]], [actual[k]], msg.atol, msg.rtol, [label])

    def _precision_kept(self, inputs: list, wanted: list, actual: list, trial):
        """A half-precision run's outputs against the same computation in float32: the candidate's mean error
        may be a few times the reference's own, not the error of a type narrower than the task's."""
        import copy

        from kernelgym.evaluation.compare import precision_lost

        if self.model_fp32 is None:
            self.model_fp32 = copy.deepcopy(self.model).float()
        wide = [x.float() if is_float(x) else x for x in inputs]
        backward = BackwardPass() if self.backward else None
        golden = run_batch(self.model_fp32, [wide], self.job.device, backward)
        return precision_lost(trial, as_list(golden[0]), wanted, actual, self.dtype, self.labels)

    def _actual(self, meta: dict, readback):
        if "error" in meta:
            return str(meta["error"])
        if "ipc" in meta:
            return protocol.cuda_tensor_from_wire(meta, self.job.device)
        return protocol.tensor_in_buffer(meta, readback).to(self.job.device)


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
    labels += [f"gradient of input {k}" for k, x in enumerate(inputs) if is_float(x)]
    return labels + [f"gradient of parameter {name!r}" for name, _ in model.named_parameters()]


def _roofline_facts(job: ChildJob, model, inputs, outputs) -> dict:
    """FLOPs and minimum bytes of the task (and the machine's peaks when not cached); {} if they fail."""
    if not job.roofline or job.mode != "run":
        return {}
    from dataclasses import asdict

    from kernelgym.evaluation import roofline

    try:
        if job.cached_cost:
            cost = roofline.TaskCost(**job.cached_cost)
        else:
            backward_inputs = int(inputs[-1]) + 1 if job.backward else 0  # the upstream gradients, counted
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
        elif isinstance(msg, m.FillInputs):
            side.fill_inputs(msg)
        elif isinstance(msg, m.Compare):
            side.compare(msg, fds)
        elif isinstance(msg, m.Release):
            side.batches.pop(msg.batch, None)
        else:
            return


