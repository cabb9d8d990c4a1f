"""The judge's conversation with its two evaluation processes, as typed messages.

The worker (trusted) talks to the reference process R (trusted: task code only) and the candidate process C
(untrusted: it owns its whole process, native code included). Nothing the verdict depends on lives in C:
no timer, no reference, no expected output, no list of what will be checked.

    W                                R (reference)                       C (candidate)
    |  <--------------------- Hello ---|                                    |
    |  Job --------------------------->|  Job ----------------------------->|  (spares: after Hello)
    |  <--------------------- Ready ---|  (init args, sizes, roofline)      |
    |  <--------------------------------------------------------- Hello ---|
    |  <--------------------------------------------------------- Build ---|  (repeated: the worker
    |  Built | BuildFailed ---------------------------------------------->|   compiles, C only loads)
    |  <-------------------------------------------------------- Loaded ---|
    |  Construct(init args) ------------------------------------------->   |
    |  <--------------------------------------------------- Constructed ---|
    |  MakeInputs(seeds) ------------> |                                    |
    |  <------------------ Inputs(fd) -|  fresh sets in a sealed arena      |
    |  RunBatch(arena) --------------> |  clock: W's, around each batch     |
    |  <------------- BatchDone -------|                                    |
    |  RunBatch(arena) ------------------------------------------------->  |
    |  <----------------------------------------------------- BatchDone ---|  W freezes C's tree, reads
    |  Compare(readback) ------------> |  all calls of the batch at once     |   every output itself, thaws
    |  <---------------- Compared -----|                                    |
    |  Release ----------------------> |  Release ------------------------> |
    |  ... correctness batch, timed rounds (order alternates), profiled batch ...
    |  Stop -------------------------> |  Stop ---------------------------> |

On a GPU, Inputs carries IPC handles of empty buffers instead: C maps them (RunBatch map_only), W freezes C,
R fills them (FillInputs -> InputsFilled), and W thaws C inside the clock of its RunBatch.

Every batch, checked or timed or profiled, is the same RunBatch over fresh inputs: C cannot tell them apart by
the conversation (only the profiled one runs under a profiler). Senders say how many items follow, so no side
recomputes the other's counts.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import socket
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kernelgym.workers import protocol

_REGISTRY: dict[str, type[Message]] = {}


@dataclass
class Message:
    kind: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.kind = re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()
        _REGISTRY[cls.kind] = cls


def send(sock: socket.socket, message: Message, blobs=(), fds=()) -> None:
    protocol.send(sock, message.kind, dataclasses.asdict(message), blobs, fds)


def receive(sock: socket.socket, deadline: float | None = None,
            max_blob_bytes: int = protocol.MAX_BLOB_BYTES) -> tuple[Message, list[bytearray], list[int]]:
    """The next message, its blobs and passed descriptors; ProtocolError if it is not one of ours or a field
    is not of its declared type (a candidate writes what it likes on its socket)."""
    kind, meta, blobs, fds = protocol.recv_with_fds(sock, deadline=deadline, max_blob_bytes=max_blob_bytes)
    cls = _REGISTRY.get(kind)
    hints = _field_types(cls) if cls is not None else {}
    fields = {k: v for k, v in meta.items() if k in hints}
    wrong = [k for k, v in fields.items() if not _fits(v, hints[k])]
    if cls is None or wrong:
        for fd in fds:  # never keep a descriptor that came with a message refused
            protocol.close_fd(fd)
        raise protocol.ProtocolError(f"unknown message {kind!r}" if cls is None else
                                     f"malformed {kind!r}: {', '.join(wrong)} not of the declared type")
    return cls(**fields), blobs, fds


@functools.cache
def _field_types(cls: type[Message]) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _fits(value: Any, hint: Any) -> bool:
    """Whether a decoded JSON value is of a field's declared type (containers checked element by element)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, a) for a in args)
    if hint is type(None):
        return value is None
    if hint in (int, float):
        return isinstance(value, int | float if hint is float else int) and not isinstance(value, bool)
    if origin is list or hint is list:
        return isinstance(value, list) and (not args or all(_fits(v, args[0]) for v in value))
    if origin is dict or hint is dict:
        return isinstance(value, dict) and (not args or all(_fits(k, args[0]) and _fits(v, args[1])
                                                            for k, v in value.items()))
    return isinstance(value, hint) if isinstance(hint, type) else True


# both processes ------------------------------------------------------------------------------------------

@dataclass
class Hello(Message):
    notes: list[str] = field(default_factory=list)  # what the sandbox could not apply
    pid: int = 0  # as the worker sees it (checked against the worker's own view of the tree)


@dataclass
class Job(Message):
    """W -> a process started ahead of its job (a spare): the job, pickled in the one blob. Trusted to
    untrusted only; nothing a process sends is ever unpickled."""


@dataclass
class Failed(Message):
    """A stage raised in the process; `kind` is compile | contract | oom | cuda | runtime."""

    stage: str = ""
    error_kind: str = "runtime"
    message: str = ""
    frames: list[str] = field(default_factory=list)
    log: str = ""


@dataclass
class RunBatch(Message):
    """Call forward once per input set, in order; reply BatchDone. On the CPU the arena's fd comes along."""

    batch: int = 0
    # per call, per input: tensor (offset, dtype, shape) or value
    layout: list[list[dict]] = field(default_factory=list)
    # GPU: per call, per input, a CUDA IPC handle or a value
    ipc: list[list[dict]] = field(default_factory=list)
    profile: bool = False
    map_only: bool = False  # GPU: map the (still empty) IPC input buffers and answer at once


@dataclass
class BatchDone(Message):
    batch: int = 0
    outputs: list[list[dict]] = field(default_factory=list)  # per call, per output: address/ipc, dtype, shape
    inputs: list[list[dict]] = field(default_factory=list)  # CPU: where each input tensor was mapped
    own_kernel_calls: int = 0  # counted in C: informative, never trusted alone
    precision_lowered: bool = False
    profile: dict[str, Any] = field(default_factory=dict)
    backward_kernel_calls: int = -1  # backward tasks: own kernel calls while autograd ran the backward


@dataclass
class Release(Message):
    batch: int = 0


@dataclass
class Stop(Message):
    pass


# the reference process --------------------------------------------------------------------------------

@dataclass
class InitArgs(Message):
    """get_init_inputs() as wire values, sent before the reference builds its model: the candidate's import
    and construction run beside that build instead of after it."""

    init_args: list[dict] = field(default_factory=list)


@dataclass
class Ready(Message):
    outputs_per_call: int = 1
    input_bytes: int = 0  # one input set
    output_bytes: int = 0  # one call's outputs
    device_memory_bytes: int = 0  # GPU: free device memory when the reference was ready
    flops: float | None = None
    min_bytes: float | None = None
    peaks: dict | None = None
    startup_s: dict = field(default_factory=dict)  # seconds of the reference's start, part by part


@dataclass
class MakeInputs(Message):
    batch: int = 0
    seeds: list[int] = field(default_factory=list)
    perturbed: list[bool] = field(default_factory=list)


@dataclass
class Inputs(Message):
    """The fresh sets, in a sealed memfd (passed as an fd) on the CPU, as IPC handles on the GPU."""

    batch: int = 0
    layout: list[list[dict]] = field(default_factory=list)
    ipc: list[list[dict]] = field(default_factory=list)


@dataclass
class FillInputs(Message):
    """GPU: copy the batch's sets into the buffers the candidate has mapped. Sent only while the candidate is
    frozen, so those buffers hold nothing it could start on before the clock does."""

    batch: int = 0


@dataclass
class InputsFilled(Message):
    batch: int = 0


@dataclass
class Compare(Message):
    """Every call of a batch at once: outputs the worker read from C into the readback memfd that travels
    with this message (CPU: offsets into it) or C's IPC handles (GPU). Checked last call first."""

    batch: int = 0
    outputs: list[list[dict]] = field(default_factory=list)  # per call, per output
    atol: float = 1e-4
    rtol: float = 1e-4


@dataclass
class Compared(Message):
    trial: dict = field(default_factory=dict)  # the first failing call's TrialResult as a dict, or a pass
    inputs_modified: bool = False  # GPU: a shared input set no longer matches the reference's copy
    call: int = -1  # the call that failed (-1: all passed)
    last_checked_ns: int = 0  # R's monotonic clock once the batch's last call was checked (GPU lag bound)


# the candidate process --------------------------------------------------------------------------------

@dataclass
class Build(Message):
    request: dict = field(default_factory=dict)  # language + what that builder needs


@dataclass
class Built(Message):
    path: str = ""


@dataclass
class BuildFailed(Message):
    message: str = ""
    log: str = ""


@dataclass
class Loaded(Message):
    pass


@dataclass
class Construct(Message):
    init_args: list[dict] = field(default_factory=list)
    init_seed: int = 0


@dataclass
class Constructed(Message):
    pass
