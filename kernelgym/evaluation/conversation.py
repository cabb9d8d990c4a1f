"""The worker's side of its conversation with an evaluation's two processes (workers/messages.py): sending,
receiving, the builds the candidate asks for served on the way, and what each failure means. A dead or silent
candidate is its own crash or timeout; a dead or silent reference is the judge's failure.
"""

from __future__ import annotations

import contextlib
import os
import time

from kernelgym.evaluation import rules
from kernelgym.evaluation.outcome import end
from kernelgym.evaluation.result import BuildResult, LoadResult
from kernelgym.evaluation.state import Evaluation
from kernelgym.workers import messages as m
from kernelgym.workers.process import Died


def to_candidate(ev: Evaluation, message: m.Message, fds=()) -> None:
    try:
        ev.candidate.send(message, fds=fds)
    except Died:
        death = ev.candidate.death()
        raise end(rules.CRASH, f"the candidate's process {death} during {ev.stage}") from None


def to_reference(ev: Evaluation, message: m.Message, fds=()) -> None:
    try:
        ev.reference.send(message, fds=fds)
    except Died:
        raise end(rules.JUDGE_FAILED, f"the reference process {ev.reference.death()}") from None


@contextlib.contextmanager
def reference_answering(ev: Evaluation):
    """A reference silent past its deadline ran past its limit; one that died is the judge's failure."""
    try:
        yield
    except TimeoutError:
        raise end(rules.TIMEOUT, "the task's reference ran past its limit") from None
    except Died:
        raise end(rules.JUDGE_FAILED, f"the reference process {ev.reference.death()}") from None


def from_reference(ev: Evaluation, expected: type[m.Message]) -> m.Message:
    with reference_answering(ev):
        msg, _, _ = ev.reference.receive(ev.reference_deadline)
    if isinstance(msg, m.Failed):
        raise end(rules.REFERENCE_FAILED, f"the task's reference raised {msg.message[:300]}")
    if not isinstance(msg, expected):
        raise end(rules.JUDGE_FAILED, f"the reference process said {msg.kind!r}")
    return msg


def receive(ev: Evaluation, expected: type[m.Message], stage: str, limit_s: float) -> m.Message:
    """The candidate's next message of the expected type; build requests are served on the way."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            msg, _, fds = ev.candidate.receive(deadline)
        except TimeoutError:
            said = (f"the {stage} stage ran past its limit of {limit_s:g} s (timeout_s; builds get "
                    "build_timeout_s)")
            raise end(rules.TIMEOUT, said) from None
        except Died:
            raise end(rules.CRASH, f"the candidate's process {ev.candidate.death()} during {stage}") from None
        for fd in fds:
            os.close(fd)
        if isinstance(msg, m.Build):  # builds, in any stage, beside the stage's own limit
            # One budget for all the builds of an evaluation: a build's time is added to the stage's
            # deadline, so a solution asking for build after build held a worker without end (red team).
            left = ev.options.build_timeout_s - ev.build_s
            if left <= 0:
                raise end(rules.TIMEOUT, f"the builds it asked for took {ev.build_s:.0f} s together, "
                                         f"past build_timeout_s ({ev.options.build_timeout_s:g} s)")
            started = time.monotonic()
            _build(ev, msg, started + left)
            deadline += time.monotonic() - started
        elif isinstance(msg, m.Failed):
            failed(ev, msg)
        elif isinstance(msg, expected):
            return msg
        else:
            raise end(rules.PROTOCOL, f"unexpected {msg.kind!r} during {stage}")


def _build(ev: Evaluation, msg: m.Build, deadline: float) -> None:
    from kernelgym.build import serve

    started = time.monotonic()
    reply, cached = serve.serve(msg.request, max(1.0, deadline - time.monotonic()))
    if isinstance(reply, m.Built):  # the solution's own code: what its samples are held to
        ev.watch.classifier.add_built(reply.path)
    ev.cached = ev.cached and cached
    ev.build_s += time.monotonic() - started
    to_candidate(ev, reply)


def failed(ev: Evaluation, msg: m.Failed) -> None:
    """The candidate's own report of a failure, as the verdict it earns."""
    stage = msg.stage
    if msg.error_kind == "compile" or (stage == "load" and "BuildError" in msg.message):
        ev.result.build = BuildResult(False, round(ev.build_s, 3), False,
                                      log=trim_log(msg.log or msg.message))
        first = msg.message.splitlines()[0][:300] if msg.message else "build failed"
        raise end(rules.COMPILE_ERROR, first)
    if msg.error_kind == "cuda":
        raise end(rules.CUDA_ERROR, f"{msg.message[:300]} (during {stage}; the process is discarded)")
    if msg.error_kind == "contract":
        raise end(rules.CONTRACT, msg.message)
    where = "; ".join(msg.frames)
    text = msg.message[:500] + (f" [{where}]" if where else "")
    if stage in ("load", "init"):
        ev.result.build = BuildResult(True, round(ev.build_s, 3), ev.cached)
        ev.result.load = LoadResult(False, error=msg.message[:2000])
        raise end(rules.LOAD_ERROR, text)
    raise end(rules.OUT_OF_MEMORY if msg.error_kind == "oom" else rules.RUNTIME_ERROR, text)


def trim_log(log: str, max_lines: int = 30) -> str:
    """The compiler lines that matter: errors first, with the line after each for context."""
    lines = [ln for ln in log.splitlines() if ln.strip()]
    important = [i for i, ln in enumerate(lines) if "error" in ln.lower()]
    if not important:
        return "\n".join(lines[-max_lines:])
    keep: list[int] = []
    for i in important:
        for j in (i, i + 1, i + 2):
            if j < len(lines) and j not in keep:
                keep.append(j)
    return "\n".join(lines[j] for j in keep[:max_lines])
