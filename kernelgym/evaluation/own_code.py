"""Whether the solution's own compiled code did the work, from instruction pointers sampled outside it (CPU).

Every batch of both sides is sampled alike (`BatchSampler`: perf task-clock on every thread of every process
of the side's tree, evaluation/ip_sampler.py), so no batch looks different to the candidate and the timer
interrupts cost both sides the same share. The candidate's samples are attributed to the files mapped where
they fell, and each file to a kind (own, torch, glue or other: evaluation/code_kinds.py); the CPU time of
threads that were not sampled (born and gone within a batch) counts as other code.

The verdict (`judge`) asks that the solution's own code did more of the work than torch and every other
library together, so a forward made of PyTorch ops, however it is dressed (its ATen calls hidden from a
profiler, a kernel counter bumped by Python, a token kernel), is never `ok`: its compute falls in torch's
libraries, where nothing in the candidate's Python can move it. Nothing the candidate writes is read.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

from kernelgym.evaluation.code_kinds import GLUE, OTHER, OWN, TORCH, Classifier, is_housekeeping, readable
from kernelgym.evaluation.ip_sampler import IpSampler, IpSamples
from kernelgym.evaluation.own_images import OwnImages

PERIOD_NS = 1_000_000  # one sample per ms of a thread's CPU time: ~2% of it (20 µs a sample on CI's VMs)
RING_PAGES = 64  # 256 KiB per thread: ~10 s of one thread's CPU time at 1 ms, longer than any batch's limit


@dataclass
class OwnCodeEvidence:
    """What the candidate's sampled batches add up to (samples; unsampled CPU time in sample periods)."""

    available: bool = True
    note: str = ""  # why not available (the host's refusal), or what was left out
    period_ns: int = PERIOD_NS
    by_kind: Counter = field(default_factory=Counter)
    by_path: Counter = field(default_factory=Counter)
    torch_by_symbol: Counter = field(default_factory=Counter)  # PyTorch's samples, by function
    batches: int = 0
    incomplete_batches: int = 0  # a ring overflowed or samples were lost
    timed_work: list[tuple[int, int]] = field(default_factory=list)  # work() added by each timed batch

    @property
    def total(self) -> int:
        return sum(self.by_kind.values())

    def share(self, *kinds: str) -> float:
        return sum(self.by_kind[k] for k in kinds) / self.total if self.total else 0.0

    def add(self, samples: list[IpSamples], tree_cpu_ns: int | None, classifier: Classifier,
            timed: bool = False) -> None:
        """One batch: every process's samples, and the tree's CPU time over the batch (None: unknown), of
        which what no sampled thread spent counts as other code (a thread born and gone in the batch)."""
        self.batches += 1
        own_before, foreign_before = self.work()
        self._add(samples, tree_cpu_ns, classifier)
        if timed:
            own, foreign = self.work()
            self.timed_work.append((own - own_before, foreign - foreign_before))

    def work(self) -> tuple[int, int]:
        """The samples of work, outside the glue: the solution's own, and PyTorch's and other code's."""
        return self.by_kind[OWN], self.by_kind[TORCH] + self.by_kind[OTHER]

    def timed_foreign_share(self) -> tuple[float, int]:
        """The foreign share of the work, each timed batch counted once (as the timing's median counts it),
        and how many timed batches had work samples. The pooled share weighs batches by their CPU time: a
        candidate that burns its own code in a few batches outweighs PyTorch doing the work in the rest,
        which are the ones the median pays."""
        shares = [foreign / (own + foreign) for own, foreign in self.timed_work if own + foreign]
        return (sum(shares) / len(shares) if shares else 0.0), len(shares)

    def _add(self, samples: list[IpSamples], tree_cpu_ns: int | None, classifier: Classifier) -> None:
        sampled_ns = 0
        for one in samples:
            sampled_ns += one.cpu_ns_sampled_threads
            if one.rings_overflowed or one.lost_records:
                self.incomplete_batches += 1
            for path, n in one.samples_by_path.items():
                self.by_path[path] += n
                kind = classifier.classify(path)
                if kind == TORCH:
                    self._split_torch(path, one.offsets_by_path.get(path, {}), n)
                else:
                    self.by_kind[kind] += n
        if tree_cpu_ns is not None and tree_cpu_ns > sampled_ns:
            self.by_kind[OTHER] += (tree_cpu_ns - sampled_ns) // self.period_ns
            if (tree_cpu_ns - sampled_ns) >= self.period_ns:
                self.by_path["[threads not sampled]"] += (tree_cpu_ns - sampled_ns) // self.period_ns

    def _split_torch(self, path: str, offsets: dict[int, int], n: int) -> None:
        """PyTorch's samples: allocating, filling and copying count as glue (an honest wrapper's
        `torch::zeros_like`); everything else in its libraries is its compute."""
        from kernelgym.evaluation.symbols import symbols

        table = symbols(path) if offsets else None
        housekeeping = 0
        for offset, count in offsets.items():
            name = table.name_at(offset) if table is not None else ""
            if is_housekeeping(name):
                housekeeping += count
            else:
                self.torch_by_symbol[name[:200] or os.path.basename(path)] += count
        self.by_kind[GLUE] += housekeeping
        self.by_kind[TORCH] += n - housekeeping

    def summary(self) -> dict[str, float]:
        return {k: round(self.share(k), 3) for k in (OWN, TORCH, GLUE, OTHER)}

    def top_torch_ms(self, n: int = 5) -> list[tuple[str, float]]:
        """PyTorch's compute functions by sampled CPU time over the batches (ms), named readably."""
        by_name: Counter = Counter()
        for name, count in self.torch_by_symbol.items():
            by_name[readable(name)] += count
        return [(name, round(c * self.period_ns / 1e6, 3)) for name, c in by_name.most_common(n)]

    def top_paths(self, n: int = 5) -> list[tuple[str, float]]:
        total = self.total or 1
        return [(os.path.basename(p) or p, round(c / total, 3)) for p, c in self.by_path.most_common(n)]


MIN_SAMPLES = 30  # the share itself is judged from this much work on (an honest share is within ~0.06)
SIGNIFICANCE = 1e-3  # below it, fewer samples already rule out a foreign share within the allowed one


def _tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    from math import exp, lgamma, log

    if k <= 0:
        return 1.0
    total = 0.0
    for i in range(k, n + 1):
        total += exp(lgamma(n + 1) - lgamma(i + 1) - lgamma(n - i + 1) + i * log(p) + (n - i) * log(1 - p))
    return min(total, 1.0)


MIN_TIMED_BATCHES = 5  # the timing's own least number of batches


def _judge_timed_batches(evidence: OwnCodeEvidence, max_foreign_share: float) -> tuple[str, str] | None:
    """The same limit on the timed batches' shares, each batch counted once: own code run in a few batches
    must not stand for the others (tests/adversarial/cpp_passthrough_in_most_batches.py)."""
    share, batches = evidence.timed_foreign_share()
    if batches < MIN_TIMED_BATCHES or share <= max_foreign_share:
        return None
    which = "torch" if evidence.by_kind[TORCH] >= evidence.by_kind[OTHER] else "other"
    return which, (f"in the average timed batch, {share:.0%} of the candidate's sampled work ran outside its "
                   f"own code ({batches} batches): its own code's samples came from a few batches")


def decides(evidence: OwnCodeEvidence, max_foreign_share: float) -> bool:
    """Whether the samples can decide either way: MIN_SAMPLES of work, or fewer that already rule out an
    allowed share. Fewer samples than that (a fast candidate, a short timing) decide nothing, and the
    in-process profile decides instead, as on a host that refuses perf events: a passthrough whose few
    samples happened to fall in glue must not pass for want of evidence."""
    own, foreign = evidence.work()
    work = own + foreign
    if not evidence.available or not work:
        return False
    return work >= MIN_SAMPLES or (foreign / work > max_foreign_share
                                   and _tail(foreign, work, max_foreign_share) < SIGNIFICANCE)


def judge(evidence: OwnCodeEvidence, max_foreign_share: float) -> tuple[str, str] | None:
    """(which rule: "torch" or "other", message) when the samples show the work was not the solution's own,
    else None.

    The work is the samples outside the glue: own, torch and other. Torch's or other code's part of it
    above `max_foreign_share` is a passthrough (or another library doing the work): judged on the share
    once there are MIN_SAMPLES of work, and before that only when the samples rule out an allowed share
    (a one-sided binomial test: a tiny task's few samples, all in torch, are still evidence)."""
    own, foreign = evidence.work()
    work = own + foreign
    if not evidence.available or not work:
        return None
    share = foreign / work
    if not (share > max_foreign_share and
            (work >= MIN_SAMPLES or _tail(foreign, work, max_foreign_share) < SIGNIFICANCE)):
        return _judge_timed_batches(evidence, max_foreign_share)
    torch_part, other_part = evidence.by_kind[TORCH] / work, evidence.by_kind[OTHER] / work
    seen = ", ".join(f"{name} {part:.0%}" for name, part in evidence.top_paths(3))
    which = "torch" if torch_part >= other_part else "other"
    if own == 0:
        return which, (f"none of the candidate's sampled work ran in the solution's own libraries (PyTorch "
                       f"{torch_part:.0%}, other code {other_part:.0%}; {seen})")
    return which, (f"{share:.0%} of the candidate's sampled work ran outside its own code (PyTorch "
                   f"{torch_part:.0%}, other code {other_part:.0%}; {seen})")


class BatchSampler:
    """Samples every thread of every given process in each batch (start ... stop); the events stay open
    between batches (an ioctl each to resume: opening and mapping them costs milliseconds). Hosts that refuse
    perf events leave `refused` set to the reason."""

    def __init__(self, period_ns: int = PERIOD_NS, vet=None):
        """vet: relabels the maps before the samples are attributed (IpSampler.vet)."""
        self.period_ns = period_ns
        self.vet = vet
        self.refused = ""
        self._by_pid: dict[int, IpSampler] = {}
        self._active: list[IpSampler] = []
        self._inherited = False  # events inherited by later threads and processes: sample the first tree only

    def start(self, pids: list[int], cpus: tuple[int, ...] | None = None) -> bool:
        """cpus: the cpuset the processes cannot leave; their threads born meanwhile are then sampled too."""
        self._active = []
        first = not self._by_pid
        for pid in pids:
            sampler = self._by_pid.get(pid)
            try:
                if sampler is not None:
                    sampler.resume()
                elif first or not self._inherited:
                    sampler = IpSampler(pid, period_ns=self.period_ns, ring_pages=RING_PAGES, cpus=cpus,
                                        vet=self.vet)
                    if not sampler.start():
                        self.refused = sampler.refused
                        self.close()
                        return False
                    self._by_pid[pid] = sampler
                else:
                    continue
            except (ProcessLookupError, OSError):  # ended meanwhile: its CPU time still counts
                self._drop(pid)
                continue
            self._active.append(sampler)
        self._inherited = self._inherited or (first and cpus is not None)
        return True

    def stop(self, attribute_samples: bool = True) -> list[IpSamples]:
        found = []
        for sampler in self._active:
            try:
                found.append(sampler.pause(attribute_samples))
            except (ProcessLookupError, OSError):
                self._drop(sampler.pid)
        self._active = []
        return found

    def _drop(self, pid: int) -> None:
        sampler = self._by_pid.pop(pid, None)
        if sampler is not None:
            sampler.close()

    def close(self) -> None:
        for sampler in self._by_pid.values():
            sampler.close()
        self._by_pid, self._active = {}, []


class CandidateWatch:
    """The trusted side's view of the candidate's CPU work in one evaluation: its cgroup (cores fixed, CPU
    time counted for the whole tree) and the samples of every batch. Off the CPU it does nothing."""

    def __init__(self, on_cpu: bool, native: bool = True):
        """on_cpu: the candidate runs on the CPU (a cgroup holds it). native: its kernels are native CPU
        code (the cpp backend), so its samples say whose code did the work (Triton's interpreter does not)."""
        from kernelgym.workers.cgroup import CandidateCgroup

        self.on_cpu = on_cpu
        self.native = on_cpu and native
        self.cgroup: CandidateCgroup | None = None
        self.notes: list[str] = []  # what fell back to what, for the verdict's notes
        self.classifier = Classifier()
        self.evidence = OwnCodeEvidence()
        # The own libraries' loaded images, pinned when first seen: a copy of other code in a later mapping
        # of the same file is not the solution's (evaluation/own_images.py).
        self.own_images = OwnImages(lambda: self.classifier.own)
        self.sampler = BatchSampler(vet=self.own_images.vet)
        self.reference_sampler = BatchSampler()  # the reference pays the same interrupts; its samples unread

    # the cgroup --------------------------------------------------------------------------------------------
    def make_cgroup(self, cores: set[int], memory_bytes: int | None = None) -> list[str] | None:
        """The files the candidate's process writes itself into, first thing after the fork."""
        from kernelgym.workers.cgroup import CandidateCgroup

        if not self.on_cpu:
            return None
        self.cgroup, why = CandidateCgroup.create(cores, memory_bytes)
        if self.cgroup is None:
            self.notes.append(f"no cgroup for the candidate ({why}); fallback: its cores are held by "
                              "affinity and checked per thread, its CPU time read per process in clock ticks")
            return None
        return self.cgroup.join_files()

    def check_joined(self) -> list[str]:
        """Notes for the verdict: the cgroup's fallbacks, and a cgroup that the candidate did not enter."""
        if self.cgroup is not None and not self.cgroup.has_members():
            self.cgroup.remove()
            self.cgroup = None
            self.notes.append("the candidate's process could not enter its cgroup; fallback: affinity, and "
                              "CPU time per process in clock ticks")
        return list(self.notes)

    def cpu_ns(self) -> int:
        return self.cgroup.cpu_ns()

    def oom_kills(self) -> int:
        """The candidate's processes killed at its tree's memory limit (0 without a memory cgroup)."""
        return self.cgroup.oom_kills() if self.cgroup is not None else 0

    # sampling ----------------------------------------------------------------------------------------------
    def judges_own_code(self) -> bool:
        """Whether the samples decide (CPU, perf events allowed); else the in-process fallback does."""
        return self.native and not self.evidence.note and self.evidence.available

    def start(self, pids: list[int], cores: set[int] | None = None) -> None:
        if not self.judges_own_code():
            return
        cpus = tuple(sorted(cores)) if cores and self.cgroup is not None else None
        if not self.sampler.start(pids, cpus):
            self.evidence.available = False
            self.evidence.note = (f"{self.sampler.refused}; fallback: the solution's own kernel calls are "
                                  "counted inside the candidate's process (forgeable by its code)")

    def start_reference(self, pid: int) -> None:
        if self.judges_own_code():
            self.reference_sampler.start([pid])

    def discard(self) -> None:
        """The reference's batch: sampled only so that both sides pay the same interrupts."""
        self.reference_sampler.stop(attribute_samples=False)

    def take(self, tree_cpu_s: float | None, timed: bool = False) -> None:
        """The candidate's batch, after it was frozen: its samples, and the CPU time its sampled threads did
        not account for (exact only with the cgroup; per-process ticks are too coarse to count)."""
        samples = self.sampler.stop()
        if self.judges_own_code():
            tree_ns = int(tree_cpu_s * 1e9) if self.cgroup is not None and tree_cpu_s is not None else None
            self.evidence.add(samples, tree_ns, self.classifier, timed)

    def close(self) -> None:
        self.sampler.close()
        self.reference_sampler.close()
        if self.cgroup is not None:
            self.cgroup.remove()
