"""The reference process's GPU input handover, its logic run on the CPU: CUDA's pool, synchronization and IPC
export are replaced by CPU stand-ins (CI has no GPU; tests/gpu runs the real thing).

What must hold: the buffers the candidate maps are not the reference's own sets and are filled only when
asked (the worker asks once the candidate is frozen), the reference computes on its own sets whatever the
candidate writes into the shared buffers, and such a write is seen.
"""

from __future__ import annotations

import contextlib
import socket

import torch

from kernelgym.workers import messages as m
from kernelgym.workers import protocol, reference_side
from kernelgym.workers.child import ChildJob


class SeenInputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.seen: list[int] = []

    def forward(self, x):
        self.seen.append(x.data_ptr())
        return x * 2


def gpu_reference_on_cpu(monkeypatch) -> tuple[reference_side._ReferenceSide, socket.socket]:
    exported: list[torch.Tensor] = []

    def to_wire(tensor, keep):
        keep.append(tensor)
        exported.append(tensor)
        return {"ipc": {"handle": f"{len(exported):02x}" * 32}}

    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda, "MemPool", lambda *a, **k: object())
    monkeypatch.setattr(torch.cuda, "use_mem_pool", lambda *a, **k: contextlib.nullcontext())
    monkeypatch.setattr(protocol, "cuda_tensor_to_wire", to_wire)
    ours, theirs = socket.socketpair()
    job = ChildJob(task_source="", solution_source="", backend="triton", device="cuda", mode="run",
                   dtype="float32", init_seed=0, perturb="none")
    side = reference_side._ReferenceSide(job, ours)
    side.input_set = lambda seed, perturbed: [torch.randn(64, generator=torch.Generator().manual_seed(seed))]
    side.model = SeenInputs()
    side.exported = exported
    return side, theirs


def test_the_candidate_maps_buffers_of_its_own_filled_only_when_asked(monkeypatch):
    side, worker = gpu_reference_on_cpu(monkeypatch)
    side.make_inputs(m.MakeInputs(1, seeds=[3, 4], perturbed=[False, False]))
    inputs, _, _ = m.receive(worker)
    assert isinstance(inputs, m.Inputs) and len(inputs.ipc) == 2
    entry = side.batches[1]
    mine = {x.data_ptr() for s in entry["sets"] + entry["pristine"] for x in s}
    assert all(x.data_ptr() not in mine for x in side.exported), "an exported buffer is one of the sets"
    for buffer in side.exported:
        buffer.fill_(7.0)  # what the buffers held before: nothing of this batch
    side.fill_inputs(m.FillInputs(1))
    filled, _, _ = m.receive(worker)
    assert isinstance(filled, m.InputsFilled) and filled.batch == 1
    for buffer, original in zip(side.exported, (s[0] for s in entry["pristine"])):
        assert torch.equal(buffer, original)


def test_the_reference_computes_on_its_own_sets_and_sees_a_written_buffer(monkeypatch):
    side, worker = gpu_reference_on_cpu(monkeypatch)
    side.make_inputs(m.MakeInputs(1, seeds=[3], perturbed=[False]))
    m.receive(worker)
    side.fill_inputs(m.FillInputs(1))
    m.receive(worker)
    side.exported[0].zero_()  # the candidate writes its input
    side.run(m.RunBatch(1), [])
    done, _, _ = m.receive(worker)
    assert isinstance(done, m.BatchDone)
    entry = side.batches[1]
    assert side.model.seen == [entry["sets"][0][0].data_ptr()]
    assert torch.equal(entry["outputs"][0][0], entry["pristine"][0][0] * 2)  # not zeros
    right_answer = [entry["outputs"][0][0].clone()]
    compare = m.Compare(1, outputs=[[{}]], atol=1e-4, rtol=1e-4)
    assert not side._all_calls_pass(compare, None, right_answer)  # the written input fails the batch
    side.fill_inputs(m.FillInputs(1))  # the same buffer, unwritten
    m.receive(worker)
    assert side._all_calls_pass(compare, None, right_answer)
