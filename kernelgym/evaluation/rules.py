"""The judge's rules: one catalogue that the pipeline, the feedback and docs/threat-model.md all come from.

A `Reason` is what a rule says about one evaluation: the rule, the verdict it implies, and a message an
agent can act on. It is a `str` ("rule: message") so results stay plain JSON and readable in logs, but code
reads `.rule` and `.verdict`, never the text.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelgym.evaluation.verdict import Verdict


@dataclass(frozen=True)
class Rule:
    name: str
    verdict: Verdict
    stops: str  # the attack or mistake it stops (docs/threat-model.md lists these)
    evidence: str  # what the judge looks at, and where that is measured


_CATALOGUE: list[Rule] = []


def _rule(name: str, verdict: Verdict, stops: str, evidence: str) -> Rule:
    rule = Rule(name, verdict, stops, evidence)
    _CATALOGUE.append(rule)
    return rule


C, H, R, I, T, X, INF = (Verdict.COMPILE_ERROR, Verdict.HACK, Verdict.RUNTIME_ERROR, Verdict.INCORRECT,
                         Verdict.TIMEOUT, Verdict.CRASH, Verdict.INFRASTRUCTURE_ERROR)

# the contract (static, compile_error) ---------------------------------------------------------------------
NO_CODE = _rule("no_code", Verdict.NO_CODE, "a reply without a solution module (nothing is judged)",
                "the reply, parsed by the environment")
WRONG_BACKEND = _rule("wrong_backend", C, "a solution written for another backend than the one judged",
                      "the source: which loaders and decorators it uses")
SYNTAX_ERROR = _rule("syntax_error", C, "a reply that is not Python", "the source, parsed")
EMPTY_SOURCE = _rule("empty_source", C, "an empty reply", "the source")
SOURCE_TOO_LARGE = _rule("source_too_large", C, "replies too large to judge", "the source's size")
NO_MODEL_NEW = _rule("no_model_new", C, "a module without `class ModelNew`", "the source, parsed")
NO_FORWARD = _rule("no_forward", C, "a ModelNew without `forward`", "the source, parsed")
NO_KERNEL = _rule("no_kernel", C, "a solution with no kernel of the chosen backend (a pure-PyTorch rewrite, "
                                  "or code for another backend)", "the source: a loader call or @triton.jit")
# unambiguous cheats, kept static because no honest solution writes them ---------------------------------
TIMER_PATCH = _rule("timer_patch", H,
                    "replacing clocks, synchronize or CUDA events (KernelBench's strict check)",
                    "an assignment to a timer attribute in the source; timing no longer runs in the "
                    "candidate's process, so this is intent, not a hole")
COMPARISON_PATCH = _rule("comparison_patch", H, "replacing torch's comparisons (allclose, equal, ...)",
                         "an assignment to a comparison attribute in the source")
INHERITS_REFERENCE = _rule("inherits_reference", H, "`class ModelNew(Model)` that changes nothing",
                           "the source: ModelNew derives from Model and defines no forward of its own")
# building and loading --------------------------------------------------------------------------------------
COMPILE_ERROR = _rule("compile_error", C, "code that does not build",
                      "the compiler, run by the trusted worker")
LOAD_ERROR = _rule("load_error", R, "a module that fails at import or construction",
                   "the candidate's process")
CONTRACT = _rule("contract", R, "a module that breaks the solution contract at run time",
                 "the candidate's process")
NO_GPU = _rule("no_gpu", R, "CUDA code on a machine without a GPU (compiled only)", "the machine")
# correctness -----------------------------------------------------------------------------------------------
INCORRECT = _rule("incorrect", I, "wrong outputs", "outputs read by the trusted side, compared in the "
                  "reference process with its own outputs on the same fresh inputs")
RUNTIME_ERROR = _rule("runtime_error", R, "forward raising", "the candidate's process")
OUT_OF_MEMORY = _rule("out_of_memory", R, "forward running out of memory", "the candidate's process")
TOO_LARGE = _rule("too_large", R, "a task that cannot fit on this machine", "the task's input and output "
                                                                            "bytes against the device's "
                                                                            "memory, before anything runs")
INPUTS_MODIFIED = _rule("inputs_modified", H, "forward writing into its inputs (A9)",
                        "CPU: the kernel's page tables of the candidate's copy-on-write input mapping (a "
                        "written page turns private); GPU: the inputs compared with the reference's copies")
OUTPUT_ALIASES_INPUT = _rule("output_aliases_input", H, "returning an input or a view of one (A10)",
                             "output and input addresses, read by the trusted side")
KERNEL_NOT_CALLED = _rule("kernel_not_called", H, "a fallback that runs instead of the solution's kernels "
                          "(a build failing inside try/except, a token kernel)",
                          "calls into the solution's own kernels counted in its process (a CPU host without "
                          "perf events; on the CPU the samples judge: torch_compute); GPU: a timed batch "
                          "that launched none of them, seen by the worker's launch watch from outside the "
                          "candidate (launch_evidence; without it, the profiled batch's count inside it)")
PRECISION_DOWNGRADE = _rule("precision_downgrade", H, "TF32 or reduced-precision matmul switched on for an "
                                                      "fp32 task (half-precision reductions for a bf16 or "
                                                      "fp16 run)", "the precision flags after each call")
PRECISION_LOST = _rule("precision_lost", I, "a bf16 or fp16 run computed in a narrower type (fp8, or bf16 "
                       "for fp16)", "in the reference process: the outputs' mean error against a float32 run "
                       "of the reference, at most 4x the reference's own")
HELDOUT_SHAPE = _rule("heldout_shape", I, "a solution that only works at the shown shapes (hardcoded sizes)",
                      "correctness on shapes the worker draws within the task's limits, never shown in the "
                      "prompt, in processes of their own")
BACKWARD_NOT_OWN = _rule("backward_not_own", H, "a backward task whose backward is left to PyTorch's "
                         "autograd", "calls into the solution's own kernels while autograd runs the backward")
# timing ----------------------------------------------------------------------------------------------------
OUTPUTS_CHANGED = _rule("outputs_changed", H, "timed calls that skip work, cache, or finish after 'done' "
                        "(A1-A4)", "every timed call's outputs, read from the frozen process by the trusted "
                        "side and compared with the reference's outputs on the same fresh inputs; a wrong "
                        "call's input set replayed as the first call of fresh processes, their new memory "
                        "filled with garbage: right there is this rule, wrong there too is `incorrect`")
OUTPUTS_UNREADABLE = _rule("outputs_unreadable", H, "hiding timed outputs from the judge",
                           "the trusted side's read of the frozen process's memory")
EXTRA_CORES = _rule("extra_cores", H,
                    "threads or processes that use more cores than the reference gets (A5, A8), or that run "
                    "while the candidate is stopped (io_uring's workers) and slow the reference",
                    "CPU time of the candidate's whole process tree during its timed batches: its cgroup's "
                    "(every thread, exited ones included, to the ns; a cpuset it cannot widen), else /proc; "
                    "with a cgroup, also across each reference batch (counted once every thread's stop "
                    "has landed and been charged), which must stay under 2 ms")
NOT_REPRODUCED = _rule("not_reproduced", Verdict.OK, "(informational) a speedup that does not hold in a "
                       "second timing is not verified", "a second timing of both sides")
CONTENDED = _rule("contended", Verdict.OK, "(informational) a timing on cores that other processes held "
                  "is not verified", "each side's threads' time waiting for a CPU while its batches were "
                  "clocked (/proc/TID/schedstat, read by the worker)")
# profile ---------------------------------------------------------------------------------------------------
TORCH_COMPUTE = _rule("torch_compute", H, "leaving the work to PyTorch (passthrough, partial passthrough)",
                      "CPU: share of the sampled work (every batch, sampled outside the candidate) in "
                      "PyTorch's compute functions; GPU: every kernel launch of every batch, watched "
                      "from outside the candidate (launch_evidence): a vendor's or PyTorch's heavy "
                      "kernels, PyTorch's kernels launched through the solution's library, graphs over "
                      "them, PyTorch's share of the timed batches' threads launched; and the profiled "
                      "batch inside the candidate, which can add a finding, never remove one (allocation, "
                      "fill and copy excluded)")
UNTRACKED_COMPUTE = _rule("untracked_compute", H, "another library's kernels (numpy, ...) doing the work",
                          "CPU: sampled work in neither the solution's libraries, PyTorch, the interpreter "
                          "nor libc (another library, code without a file, the solution's library file "
                          "mapped outside the image the loader made of it or its code pages written since, "
                          "threads' time not sampled); "
                          "where the samples are too few or perf is refused, a profiled batch's CPU time "
                          "outside its kernels and ATen, less what the same batch harness costs a stand-in "
                          "that computes nothing (measured beside it, at most 0.5 ms a call: autograd's "
                          "round trip through Python is most of an honest tiny backward); GPU "
                          "(launch_evidence): launches from code the worker did not build, from another "
                          "process of the candidate's tree, from threads born unwatched, or through a "
                          "runtime of its own, and a batch that took time but launched nothing")
OWN_CODE_UNVERIFIED = _rule("own_code_unverified", Verdict.OK, "(informational) a GPU speedup whose kernel "
                            "launches could not all be seen from outside the candidate is not verified",
                            "the worker's launch watch (launch_evidence): uprobes refused, records lost, "
                            "threads found new where no inherited count exists, no timed batch watched")
# failures --------------------------------------------------------------------------------------------------
TIMEOUT = _rule("timeout", T, "a stage that does not end", "the trusted worker's deadline")
CRASH = _rule("crash", X, "a candidate process that dies (exit, segfault, CUDA error)",
              "the process's status")
CUDA_ERROR = _rule("cuda_error", X, "a sticky CUDA error (illegal memory access)", "the candidate's process")
REFERENCE_FAILED = _rule("reference_failed", R, "a broken task (its reference raises)",
                         "the reference process")
JUDGE_FAILED = _rule("judge_failed", INF, "a failure of a trusted process (never the candidate's fault)",
                     "the reference process or worker")
PROTOCOL = _rule("protocol", X, "a candidate process that breaks the conversation", "the trusted worker")
# the pool: failures of the judge's own processes and machine (judged again, then "not judged") -----------
WORKER_TIMEOUT = _rule("worker_timeout", INF, "a trusted worker that stops answering", "the pool's deadline")
WORKER_CRASH = _rule("worker_crash", INF, "a trusted worker that dies", "the pool's connection to it")
WORKER_ERROR = _rule("worker_error", INF, "a worker that cannot start or run", "the pool")
HOST_OOM = _rule("host_oom", INF,
                 "the host out of memory during an evaluation, not at the candidate's own limit",
                 "/proc/vmstat oom_kill; the candidate tree's memory cgroup (`oom_kill`), where one is made, "
                 "makes its own kills its failure")
DISK_FULL = _rule("disk_full", INF, "a full cache or work folder", "free space, read by the pool")
INFRASTRUCTURE = _rule("infrastructure_error", INF, "(after the retries) an evaluation the judge could not "
                       "complete: not judged, never charged", "the pool's retries")
BASELINE_ONLY = _rule("baseline_only", Verdict.OK, "(informational) the reference was timed alone", "")

RULES: dict[str, Rule] = {rule.name: rule for rule in _CATALOGUE}


class Reason(str):
    """One rule's finding: `str(reason)` is "rule: message"; `.rule` and `.verdict` are what code reads."""

    rule: str
    message: str

    def __new__(cls, rule: Rule | str, message: str) -> Reason:  # noqa: PYI034 - always a Reason
        name = rule.name if isinstance(rule, Rule) else rule
        self = super().__new__(cls, f"{name}: {message}" if message else name)
        self.rule, self.message = name, message
        return self

    def __reduce__(self):  # copies and pickles keep the rule
        return (Reason, (self.rule, self.message))

    @property
    def verdict(self) -> Verdict | None:
        rule = RULES.get(self.rule)
        return rule.verdict if rule else None

    @classmethod
    def parse(cls, text: str) -> Reason:
        """A reason read back from JSON (the inverse of str())."""
        if isinstance(text, Reason):
            return text
        name, _, message = str(text).partition(": ")
        return cls(name, message)


def reason(rule: Rule, message: str = "") -> Reason:
    return Reason(rule, message)


def catalogue_markdown() -> str:
    """The table in docs/threat-model.md (a test checks the doc against it)."""
    lines = ["| rule | verdict | stops | evidence |", "| --- | --- | --- | --- |"]
    lines += [f"| `{r.name}` | {r.verdict.value} | {r.stops} | {r.evidence} |" for r in _CATALOGUE]
    return "\n".join(lines)
