"""The candidate's outputs as the trusted worker takes them: never as the candidate's process hands them over.

CPU: read by the worker out of the frozen candidate's memory, after its page tables showed the sealed inputs
untouched, into the readback buffer the reference maps. GPU: IPC handles, refused where they name an input.
"""

from __future__ import annotations

import os

from kernelgym.evaluation import rules
from kernelgym.evaluation.outcome import Outcome, end
from kernelgym.workers import messages as m
from kernelgym.workers.readback import slot_size

ARENA_MARK = "kernelgym-inputs"
READ_ATTEMPTS = 10  # reads of a batch's outputs until one is made with no candidate thread running


class FrozenReader:
    """Reads one batch's outputs out of the frozen candidate (CPU)."""

    def __init__(self, candidate, readback, ready: m.Ready):
        self.candidate, self.readback, self.ready = candidate, readback, ready

    def read(self, done: m.BatchDone, fd: int | None, stage: str) -> list[list[dict]]:
        """CPU: the input arena as the kernel's page tables show it, then every output copied out, while no
        thread of the candidate runs: if one spent time on a CPU during the read (a stop still pending),
        the read is made again once the stops have landed. Whatever the read finds against a candidate that
        died meanwhile is a crash: a killed process loses its mappings and memory before it is a zombie."""
        try:
            return self._read_frozen(done, fd)
        except Outcome:
            self._crash_if_dead(stage)
            raise

    def _read_frozen(self, done: m.BatchDone, fd: int | None) -> list[list[dict]]:
        for _ in range(READ_ATTEMPTS):
            before = self.candidate.on_cpu_ns()
            try:
                arena = self._arena(fd)
                written = self.candidate.written_pages(arena)
            except OSError as exc:
                raise end(rules.OUTPUTS_UNREADABLE,
                          f"the candidate's memory could not be inspected ({exc})") from None
            if written:
                raise end(rules.INPUTS_MODIFIED, "forward wrote into its input tensors")
            outputs = self._read_outputs(done, arena)
            if self.candidate.on_cpu_ns() == before:
                return outputs
            self.candidate.wait_stopped(1.0)
        raise end(rules.OUTPUTS_UNREADABLE, "the candidate's threads kept running while its outputs were "
                                            "read")

    def _crash_if_dead(self, stage: str) -> None:
        if not self.candidate.alive():
            raise end(rules.CRASH, f"the candidate's process {self.candidate.death()} during {stage}")

    def _arena(self, fd: int | None) -> list[tuple[int, int]]:
        """Where this batch's input arena is mapped in the candidate: the sealed file's own pages, privately
        and whole (a mapping of another file under its name, or a hole, would hide writes to the inputs)."""
        if fd is None:
            return []
        sealed = os.fstat(fd)
        mine = [(lo, hi, perms) for lo, hi, perms, inode in self.candidate.mappings_of(ARENA_MARK)
                if inode == sealed.st_ino]
        if sealed.st_size and (sum(hi - lo for lo, hi, _ in mine) < sealed.st_size
                               or any(perms[3:4] != "p" for _, _, perms in mine)):
            raise end(rules.INPUTS_MODIFIED, "forward unmapped, replaced or shared its input buffers")
        return [(lo, hi) for lo, hi, _ in mine]

    def _read_outputs(self, done: m.BatchDone, arena: list[tuple[int, int]]) -> list[list[dict]]:
        """Each output copied out of the candidate's memory into the readback buffer the reference maps,
        after every description was checked (how many, how large, where)."""
        planned = [self._planned(metas, arena) for metas in done.outputs]
        sizes = [item["nbytes"] for call in planned for item in call if "ptr" in item]
        self.readback.reset(sum(slot_size(n) for n in sizes))
        return [[self._read_one(item) for item in call] for call in planned]

    def _planned(self, metas, arena: list[tuple[int, int]]) -> list[dict]:
        expected = int(self.ready.outputs_per_call)
        if not isinstance(metas, list) or len(metas) != expected:
            count = len(metas) if isinstance(metas, list) else "no list of"
            return [{"error": f"forward returned {count} outputs, expected {expected}"}]
        # A call's outputs are read up to twice the reference's bytes: a float64 answer to a float32 task
        # still reaches the comparison, which names the dtype; anything larger is no answer.
        room, planned = 2 * int(self.ready.output_bytes), []
        for meta in metas:
            item = described(meta)
            if "ptr" in item:
                room -= item["nbytes"]
                if room < 0:
                    item = {"error": "its outputs are over twice the size of the reference's"}
                elif any(lo < item["ptr"] + max(item["nbytes"], 1) and item["ptr"] < hi for lo, hi in arena):
                    raise end(rules.OUTPUT_ALIASES_INPUT, "an output shares memory with an input")
            planned.append(item)
        return planned

    def _read_one(self, item: dict) -> dict:
        if "ptr" not in item:
            return item
        offset, slot = self.readback.take(item["nbytes"])
        try:
            self.candidate.read_into(item["ptr"], slot)
        except (OSError, ValueError, OverflowError) as exc:
            raise end(rules.OUTPUTS_UNREADABLE, f"an output could not be read ({exc})") from None
        finally:
            slot.release()
        return {"dtype": item["dtype"], "shape": item["shape"], "offset": offset, "nbytes": item["nbytes"]}


def refuse_aliased_inputs(outputs: list, inputs_ipc: list | None) -> list:
    """GPU outputs travel as IPC handles: one naming an allocation the reference exported for the inputs
    is an input handed back (A10), whatever the candidate's process says of it."""
    sent = {item["ipc"].get("handle") for call in inputs_ipc or [] for item in call
            if isinstance(item, dict) and isinstance(item.get("ipc"), dict)}
    for call in outputs:
        for meta in call if isinstance(call, list) else []:
            if not isinstance(meta, dict):
                continue
            ipc = meta.get("ipc")
            if meta.get("aliases_input") is True or (isinstance(ipc, dict) and ipc.get("handle") in sent):
                raise end(rules.OUTPUT_ALIASES_INPUT, "an output shares memory with an input")
    return outputs


def described(meta) -> dict:
    """An output as the candidate described it, in plain checked numbers, or an error that says why not."""
    if not isinstance(meta, dict):
        return {"error": "the output is not described"}
    if "error" in meta or "ptr" not in meta:
        return {"error": str(meta.get("error", "the output is not readable"))[:300]}
    try:
        item = {"ptr": int(meta["ptr"]), "nbytes": int(meta["nbytes"]), "dtype": str(meta["dtype"]),
                "shape": [int(s) for s in meta["shape"]]}
    except (KeyError, TypeError, ValueError):
        return {"error": "the output's description is malformed"}
    if item["ptr"] < 0 or item["nbytes"] < 0 or any(s < 0 for s in item["shape"]):
        return {"error": "the output's description is malformed"}
    return item
