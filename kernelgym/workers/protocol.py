"""Messages between kernelgym's trusted process and a candidate process.

A candidate controls its whole process, so nothing it sends is unpickled: a message is a JSON header plus
raw byte blobs, and tensors travel as (dtype, shape, bytes) that are rebuilt without running any code.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from typing import Any

from kernelgym.errors import KernelGymError

MAX_HEADER_BYTES = 4 << 20
MAX_BLOB_BYTES = 64 << 30  # CPU outputs of shipped-size tasks can pass 4 GiB
_LENGTH = struct.Struct("!Q")


class ProtocolError(KernelGymError):
    """The peer sent something that is not a well-formed message (or hung up)."""


def send(sock: socket.socket, kind: str, meta: dict[str, Any] | None = None, blobs=(), fds=()) -> None:
    """`fds` (open file descriptors, e.g. an input arena) travel with the length prefix (SCM_RIGHTS)."""
    header = json.dumps({"kind": kind, "meta": meta or {}, "blobs": [memoryview(b).nbytes for b in blobs],
                         "fds": len(fds)}).encode()
    prefix = _LENGTH.pack(len(header))
    if fds:
        sent = socket.send_fds(sock, [prefix], list(fds))
        sock.sendall(prefix[sent:] + header)
    else:
        sock.sendall(prefix + header)
    for blob in blobs:
        sock.sendall(blob)


_FIRST_CHUNK = 1 << 26  # a blob's buffer grows as its bytes arrive: a size in a header reserves nothing


def _wait_budget(sock: socket.socket, deadline: float | None) -> None:
    """Before each read: the time left to the whole message's deadline (a peer that trickles its bytes
    would otherwise reset a per-read timeout forever)."""
    if deadline is None:
        return
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError
    sock.settimeout(remaining)


def _read_exact(sock: socket.socket, size: int, deadline: float | None = None) -> bytearray:
    buffer = bytearray(min(size, _FIRST_CHUNK))
    got = 0
    while got < size:
        if got == len(buffer):
            buffer.extend(bytes(min(size - got, len(buffer))))
        _wait_budget(sock, deadline)
        n = sock.recv_into(memoryview(buffer)[got:], min(len(buffer) - got, 1 << 24))
        if n == 0:
            raise ProtocolError("peer closed the connection")
        got += n
    return buffer  # no copy: large outputs are hundreds of MB


def recv(sock: socket.socket) -> tuple[str, dict[str, Any], list[bytearray]]:
    kind, meta, blobs, fds = recv_with_fds(sock)
    for fd in fds:  # not expected here: never leak a descriptor a peer pushed
        close_fd(fd)
    return kind, meta, blobs


Received = tuple[str, dict[str, Any], list[bytearray], list[int]]


def recv_with_fds(sock: socket.socket, max_fds: int = 4, deadline: float | None = None,
                  max_blob_bytes: int = MAX_BLOB_BYTES) -> Received:
    """One message. With a deadline, the whole message must arrive by it (TimeoutError), however its bytes
    are spread; `max_blob_bytes` caps what a peer may announce (0 for one that never sends blobs)."""
    _wait_budget(sock, deadline)
    data, fds, _, _ = socket.recv_fds(sock, _LENGTH.size, max_fds)
    if not data:
        raise ProtocolError("peer closed the connection")
    try:
        prefix = bytes(data) + (bytes(_read_exact(sock, _LENGTH.size - len(data), deadline))
                                if len(data) < _LENGTH.size else b"")
        (length,) = _LENGTH.unpack(prefix)
        if length > MAX_HEADER_BYTES:
            raise ProtocolError(f"header of {length} bytes")
        try:
            header = json.loads(_read_exact(sock, length, deadline))
            kind, meta, sizes = str(header["kind"]), dict(header["meta"]), [int(s) for s in header["blobs"]]
        except (ValueError, KeyError, TypeError, RecursionError) as exc:  # RecursionError: nesting
            raise ProtocolError(f"malformed header: {type(exc).__name__}") from None
        if any(s < 0 or s > max_blob_bytes for s in sizes):
            raise ProtocolError("blob size out of range")
        return kind, meta, [_read_exact(sock, s, deadline) for s in sizes], list(fds)
    except (ProtocolError, TimeoutError):
        for fd in fds:
            close_fd(fd)
        raise


def close_fd(fd: int) -> None:
    import os

    try:
        os.close(fd)
    except OSError:
        pass


# tensors -------------------------------------------------------------------------------------------------

def tensor_to_wire(tensor) -> tuple[dict[str, Any], bytes]:
    import torch

    flat = tensor.detach().contiguous().cpu().reshape(-1)
    data = memoryview(flat.view(torch.uint8).numpy()) if flat.numel() else b""
    return {"dtype": str(tensor.dtype).removeprefix("torch."), "shape": list(tensor.shape)}, data


def tensor_in_buffer(meta: dict[str, Any], buffer):
    """A tensor viewing `nbytes` at `offset` of a mapped buffer (no copy); ProtocolError where it does not
    fit."""
    import torch

    dtype = getattr(torch, str(meta["dtype"]), None)
    if not isinstance(dtype, torch.dtype):
        raise ProtocolError(f"unknown dtype {meta['dtype']!r}")
    shape = [int(s) for s in meta["shape"]]
    if any(s < 0 for s in shape):
        raise ProtocolError(f"negative size in shape {shape}")
    numel = 1
    for s in shape:
        numel *= s
    offset, nbytes = int(meta.get("offset", 0)), int(meta["nbytes"])
    if numel * torch.empty((), dtype=dtype).element_size() != nbytes:
        raise ProtocolError("tensor bytes do not match its shape")
    if not nbytes:
        return torch.empty(shape, dtype=dtype)
    if buffer is None or offset < 0 or offset + nbytes > len(buffer):
        raise ProtocolError("tensor lies outside the readback buffer")
    return torch.frombuffer(buffer, dtype=torch.uint8, count=nbytes, offset=offset).view(dtype).reshape(shape)


def tensor_from_wire(meta: dict[str, Any], data: bytes):
    """A tensor sent as a blob (its own copy of the bytes)."""
    buffer = data if isinstance(data, bytearray) else bytearray(data)
    return tensor_in_buffer({**meta, "offset": 0, "nbytes": len(data)}, buffer)


def cuda_tensor_to_wire(tensor, keep: list) -> dict[str, Any]:
    flat = tensor.detach().contiguous()
    keep.append(flat)
    (device, handle, size, offset, ref_handle, ref_offset, event_handle,
     event_sync) = flat.untyped_storage()._share_cuda_()
    return {"dtype": str(tensor.dtype).removeprefix("torch."), "shape": list(tensor.shape),
            "ipc": {"device": int(device), "handle": bytes(handle).hex(), "size": int(size),
                    "offset": int(offset),
                    "ref_handle": bytes(ref_handle).hex(), "ref_offset": int(ref_offset),
                    "event_handle": bytes(event_handle).hex() if event_handle else "",
                    "event_sync": bool(event_sync), "storage_offset": int(flat.storage_offset())}}


def cuda_tensor_from_wire(meta: dict[str, Any], device: str):
    """Map a tensor exported by another process on this GPU; every field is checked, nothing is executed."""
    import torch

    dtype = getattr(torch, str(meta["dtype"]), None)
    if not isinstance(dtype, torch.dtype):
        raise ProtocolError(f"unknown dtype {meta['dtype']!r}")
    ipc = meta["ipc"]
    shape = [int(s) for s in meta["shape"]]
    numel = 1
    for s in shape:
        numel *= s
    element = torch.empty((), dtype=dtype).element_size()
    start = int(ipc["storage_offset"])
    if int(ipc["size"]) < (start + numel) * element or start < 0:
        raise ProtocolError("shared storage smaller than the tensor it claims to hold")
    try:
        storage = torch.UntypedStorage._new_shared_cuda(
            int(ipc["device"]), bytes.fromhex(ipc["handle"]), int(ipc["size"]), int(ipc["offset"]),
            bytes.fromhex(ipc["ref_handle"]), int(ipc["ref_offset"]),
            bytes.fromhex(ipc["event_handle"]) if ipc["event_handle"] else None, bool(ipc["event_sync"]))
    except (RuntimeError, ValueError, TypeError) as exc:
        raise ProtocolError(f"could not map the shared output: {exc}") from None
    strides = []
    acc = 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= s
    return torch.empty(0, dtype=dtype, device=device).set_(storage, start, shape, list(reversed(strides)))
