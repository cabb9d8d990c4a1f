"""A candidate writes what it likes on its socket to the worker. Whatever it sends, the answer is the
candidate's own failure (`crash`, or `timeout` for a message that does not arrive in time), never the
judge's (`infrastructure_error` is not charged to the policy and is run again), and never a hang past the
stage's limit. Found by a red-team helper: a malformed Build, a BatchDone with a string count, JSON nested
200,000 deep, a 64 GiB blob announced, and a message trickled a byte a second all became
`infrastructure_error` or held the worker for minutes."""

from __future__ import annotations

import json
import socket
import struct
import threading
import time

import pytest

from kernelgym.evaluation.result import Verdict
from kernelgym.tasks import bundled
from kernelgym.workers import messages as m
from kernelgym.workers import protocol


def raw(sock: socket.socket, header: dict) -> None:
    data = json.dumps(header).encode()
    sock.sendall(struct.pack("!Q", len(data)) + data)


@pytest.mark.parametrize("kind, meta", [
    ("build", {"request": ["not", "a", "dict"]}),
    ("batch_done", {"batch": 1, "own_kernel_calls": "many"}),
    ("batch_done", {"batch": 1, "outputs": [["not a dict"]]}),
    ("failed", {"stage": "load", "message": 12}),
])
def test_a_field_of_another_type_is_a_protocol_error(kind, meta):
    ours, theirs = socket.socketpair()
    raw(theirs, {"kind": kind, "meta": meta, "blobs": [], "fds": 0})
    with pytest.raises(protocol.ProtocolError, match="not of the declared type"):
        m.receive(ours)


def test_nesting_and_announced_blobs_are_protocol_errors_without_reserving_memory():
    ours, theirs = socket.socketpair()
    deep = b"[" * 200_000 + b"]" * 200_000
    header = b'{"kind": "build", "meta": {"request": {}}, "blobs": [], "x": ' + deep + b"}"
    sender = threading.Thread(target=theirs.sendall, args=(struct.pack("!Q", len(header)) + header,))
    sender.start()
    with pytest.raises(protocol.ProtocolError, match="malformed header"):
        m.receive(ours)
    sender.join()
    raw(theirs, {"kind": "build", "meta": {"request": {}}, "blobs": [64 << 30], "fds": 0})
    with pytest.raises(protocol.ProtocolError, match="blob size"):
        m.receive(ours, max_blob_bytes=0)


def test_a_trickled_message_misses_its_deadline():
    ours, theirs = socket.socketpair()
    data = json.dumps({"kind": "loaded", "meta": {}, "blobs": [], "fds": 0}).encode()
    message = struct.pack("!Q", len(data)) + data

    def trickle():
        for byte in message:
            try:
                theirs.sendall(bytes([byte]))
            except OSError:
                return
            time.sleep(0.05)

    threading.Thread(target=trickle, daemon=True).start()
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        m.receive(ours, deadline=started + 0.5)
    assert time.monotonic() - started < 1.0
    ours.close()


FIND_SOCKET = '''
import sys, json, struct

def _worker_socket():
    frame = sys._getframe()
    while frame is not None:
        sock = frame.f_locals.get("sock")
        if sock is not None and hasattr(sock, "sendall"):
            return sock
        frame = frame.f_back
'''

MODEL = '''
from kernelgym.kernels import load_cpp
import torch.nn as nn
_lib = load_cpp("extern \\"C\\" void nothing() {}")

class ModelNew(nn.Module):
    def forward(self, x):
        return x.relu()
'''

MALFORMED_BUILD = FIND_SOCKET + '''
_header = json.dumps({"kind": "build", "meta": {"request": ["not", "a", "dict"]}, "blobs": [],
                      "fds": 0}).encode()
_worker_socket().sendall(struct.pack("!Q", len(_header)) + _header)
''' + MODEL

TRICKLED_BUILD = FIND_SOCKET + '''
import time
_header = json.dumps({"kind": "build", "meta": {"request": {"language": "cpp", "source": "", "flags": []}},
                      "blobs": [], "fds": 0}).encode()
_sock = _worker_socket()
for _byte in struct.pack("!Q", len(_header)) + _header:
    _sock.sendall(bytes([_byte]))
    time.sleep(0.5)
''' + MODEL


def test_a_malformed_message_is_the_candidates_crash(pool):
    result = pool.evaluate(bundled().get("L1/1_ReLU"), MALFORMED_BUILD, backend="cpp", size="cpu")
    assert result.verdict is Verdict.CRASH, result.reasons


def test_a_trickled_message_is_the_candidates_timeout_within_the_stage_limit(pool):
    started = time.monotonic()
    result = pool.evaluate(bundled().get("L1/1_ReLU"), TRICKLED_BUILD, backend="cpp", size="cpu",
                           timeout_s=3.0, build_timeout_s=3.0)
    assert result.verdict is Verdict.TIMEOUT, result.reasons
    assert time.monotonic() - started < 30


def test_descriptors_that_come_with_a_refused_message_are_closed():
    import os

    ours, theirs = socket.socketpair()
    data = json.dumps({"kind": "batch_done", "meta": {"own_kernel_calls": "many"}, "blobs": [],
                       "fds": 1}).encode()
    read_end, write_end = os.pipe()
    before = len(os.listdir("/proc/self/fd"))
    socket.send_fds(theirs, [struct.pack("!Q", len(data)) + data], [read_end])
    with pytest.raises(protocol.ProtocolError):
        m.receive(ours)
    assert len(os.listdir("/proc/self/fd")) == before
    for fd in (read_end, write_end):
        os.close(fd)
