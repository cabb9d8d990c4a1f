"""The GPU batch's conversation, as the trusted side runs it: the candidate never holds a batch's input values
while it can work outside the clock.

A GPU candidate maps the reference's input buffers (CUDA IPC) in a step before its timed RunBatch. Work it
does in that step is not timed, so the buffers must still be empty then: the reference fills them only once
the candidate is frozen, and the candidate is thawed only after the clock of its RunBatch has started. No
GPU runs in CI, so the two processes here are scripted stand-ins that record what they were sent and when;
the real conversation runs in tests/gpu (and tests/adversarial/triton_precompute_while_mapping.py).
"""

from __future__ import annotations

import time

from kernelgym.evaluation import batch
from kernelgym.evaluation.options import EvalOptions
from kernelgym.evaluation.state import BATCH_PARTS, Evaluation
from kernelgym.workers import messages as m

IPC_ITEM = {"ipc": {"handle": "ab" * 32}, "dtype": "float32", "shape": [4]}


class Log(list):
    def note(self, *event) -> None:
        self.append(event)


class ScriptedReference:
    def __init__(self, log: Log, candidate: ScriptedCandidate):
        self.log, self.candidate, self.replies, self.main_pid = log, candidate, [], 1

    def send(self, message: m.Message, blobs=(), fds=()) -> None:
        self.log.note("reference", message.kind, bool(self.candidate.frozen))
        if isinstance(message, m.MakeInputs):
            self.replies.append(m.Inputs(message.batch, ipc=[[dict(IPC_ITEM)] for _ in message.seeds]))
        elif isinstance(message, m.FillInputs):
            self.replies.append(m.InputsFilled(message.batch))
        elif isinstance(message, m.RunBatch):
            self.replies.append(m.BatchDone(message.batch))
        elif isinstance(message, m.Compare):
            self.replies.append(m.Compared({"index": -1, "perturbed": False, "passed": True}))

    def receive(self, deadline: float):
        return self.replies.pop(0), [], []

    def tree(self) -> list[int]:  # its processes: none real here
        return []


class ScriptedCandidate:
    def __init__(self, log: Log):
        self.log, self.frozen, self.replies, self.helpers = log, [], [], set()

    def freeze(self) -> None:
        self.log.note("candidate", "frozen")
        self.frozen = [2]

    def thaw(self) -> None:
        if self.frozen:
            self.log.note("candidate", "thawed")
        self.frozen = []

    def send(self, message: m.Message, blobs=(), fds=()) -> None:
        self.log.note("candidate", "map_only" if getattr(message, "map_only", False) else message.kind,
                      bool(self.frozen))
        if isinstance(message, m.RunBatch):
            output = {"dtype": "float32", "shape": [4], "ipc": {"handle": "cd"}}
            outputs = [] if message.map_only else [[dict(output)] for _ in message.ipc]
            self.replies.append(m.BatchDone(message.batch, outputs))

    def receive(self, deadline: float):
        return self.replies.pop(0), [], []

    def tree(self) -> list[int]:
        return [2]


class NoWatch:
    cgroup = None

    def judges_own_code(self) -> bool:
        return False

    def start_reference(self, pid: int) -> None:
        pass

    def discard(self) -> None:
        pass


def gpu_evaluation(log: Log) -> Evaluation:
    evaluation = object.__new__(Evaluation)
    evaluation.device, evaluation.options, evaluation.stage = "cuda", EvalOptions(), "timing"
    evaluation.job = type("Job", (), {"dtype": "float32"})()
    evaluation.candidate = ScriptedCandidate(log)
    evaluation.reference = ScriptedReference(log, evaluation.candidate)
    evaluation.watch, evaluation.batches = NoWatch(), 0
    # no launch watch: the scripted stand-ins launch nothing (the real one runs in tests/gpu)
    evaluation.launch_watch = evaluation.reference_launch_watch = evaluation.gpu_evidence = None
    evaluation.contention = {}  # the CPU's cores-waited record: none on a GPU
    evaluation.batch_parts_s = dict.fromkeys(BATCH_PARTS, 0.0)
    evaluation.atol = evaluation.rtol = 1e-4
    return evaluation


def clock_starts_logged(log: Log, monkeypatch) -> None:
    """Every read of the clock the batch is timed by shows in the log."""
    read = time.perf_counter_ns

    def logged() -> int:
        log.note("clock")
        return read()

    monkeypatch.setattr(batch.time, "perf_counter_ns", logged)


def test_the_reference_fills_the_mapped_buffers_only_while_the_candidate_is_frozen(monkeypatch):
    for candidate_first in (False, True):
        log = Log()
        batch.run_batch(gpu_evaluation(log), [1, 2], [False, False], candidate_first=candidate_first)
        mapped = log.index(("candidate", "map_only", False))
        filled = log.index(("reference", "fill_inputs", True))  # sent while the candidate was frozen
        timed = log.index(("candidate", "run_batch", False))
        assert mapped < filled < timed, log


def test_a_gpu_candidate_is_thawed_for_its_batch_only_once_the_clock_runs(monkeypatch):
    for candidate_first in (False, True):
        log = Log()
        clock_starts_logged(log, monkeypatch)
        batch.run_batch(gpu_evaluation(log), [1], [False], candidate_first=candidate_first)
        timed = log.index(("candidate", "run_batch", False))
        assert log[timed - 1] == ("candidate", "thawed"), log
        assert log[timed - 2] == ("clock",), log
