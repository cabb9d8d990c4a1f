"""Stage 3, the candidate's load: its process started (unless it already was), the builds it asks for
served, its module imported and `ModelNew` constructed from the reference's init arguments, while the
reference builds its own model beside it."""

from __future__ import annotations

import time

from kernelgym.evaluation import launch_evidence, rules
from kernelgym.evaluation.conversation import receive, to_candidate
from kernelgym.evaluation.outcome import Outcome, end
from kernelgym.evaluation.result import BuildResult, LoadResult
from kernelgym.evaluation.stages.reference import reference_ready, spawn
from kernelgym.evaluation.state import Evaluation
from kernelgym.workers import messages as m
from kernelgym.workers.candidate_side import run_candidate
from kernelgym.workers.process import Died


def load_beside_reference(ev: Evaluation) -> None:
    """The candidate's import and construction while the reference builds its model (on L2 tasks a
    second or more of CPU initialisation on each side, which used to run one after the other)."""
    try:
        load_candidate(ev)
    except Outcome:
        reference_ready(ev)  # a broken task is named first, as when the reference finished first
        raise
    reference_ready(ev)


def load_candidate(ev: Evaluation) -> None:
    started = time.monotonic()
    if ev.candidate is None:
        ev.candidate = spawn(ev, run_candidate, "candidate")
    try:
        hello = ev.candidate.hello(time.monotonic() + 120)
    except (TimeoutError, Died):
        raise end(rules.CRASH, "the candidate's process did not start") from None
    ev.result.static.warnings.extend(hello.notes)
    ev.result.static.warnings.extend(ev.watch.check_joined())
    # Importing gets the run limit like any stage: builds are served through it with their own limit
    # (a reply whose import loops forever cost 300 s, the build limit, when import had that limit).
    receive(ev, m.Loaded, "load", ev.options.timeout_s)
    ev.result.build = BuildResult(True, round(ev.build_s, 3), ev.cached, runnable=ev.mode != "compile")
    ev.result.load = LoadResult(True, round(time.monotonic() - started - ev.build_s, 3))
    ev.result.stage_s["load"] = round(time.monotonic() - started, 3)
    if ev.mode == "compile":
        raise end(rules.NO_GPU, "the CUDA code compiled, but this machine has no GPU to run it")
    started = time.monotonic()
    launch_evidence.start(ev)
    to_candidate(ev, m.Construct(ev.init_args, ev.child_job.init_seed))
    receive(ev, m.Constructed, "init", ev.options.timeout_s)
    launch_evidence.take_construction(ev)
    ev.result.stage_s["init"] = round(time.monotonic() - started, 3)
    if ev.build_s > ev.result.build.build_s:  # built in __init__ (many models' answers do)
        ev.result.build = BuildResult(True, round(ev.build_s, 3), ev.cached)
