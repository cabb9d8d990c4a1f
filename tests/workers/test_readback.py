"""The readback buffer the worker fills with the candidate's outputs, and how the reference views it."""

import mmap
import os

import pytest
import torch

from kernelgym.workers.protocol import ProtocolError, tensor_in_buffer
from kernelgym.workers.readback import ALIGN, Readback


def test_outputs_land_aligned_and_the_reference_sees_them_without_a_copy():
    readback = Readback()
    try:
        values = torch.arange(10, dtype=torch.float32)
        readback.reset(2 * ALIGN)
        first, slot = readback.take(3)
        slot[:] = b"abc"
        slot.release()
        second, slot = readback.take(values.numel() * 4)
        slot[:] = values.numpy().tobytes()
        slot.release()
        assert (first, second) == (0, ALIGN)
        view = mmap.mmap(os.dup(readback.fd), 0, flags=mmap.MAP_PRIVATE,
                         prot=mmap.PROT_READ | mmap.PROT_WRITE)
        seen = tensor_in_buffer({"dtype": "float32", "shape": [2, 5], "offset": second, "nbytes": 40}, view)
        assert torch.equal(seen, values.reshape(2, 5))
    finally:
        readback.close()


def test_a_slot_past_the_reserved_room_is_refused():
    readback = Readback()
    try:
        readback.reset(ALIGN)
        readback.size = ALIGN  # as if the memfd were exactly the reserved room
        readback.take(ALIGN)
        with pytest.raises(ValueError):
            readback.take(1)
    finally:
        readback.close()


@pytest.mark.parametrize("meta", [
    {"dtype": "float32", "shape": [4], "offset": 0, "nbytes": 15},  # bytes do not match the shape
    {"dtype": "float32", "shape": [4], "offset": 60, "nbytes": 16},  # past the buffer's end
    {"dtype": "float32", "shape": [4], "offset": -8, "nbytes": 16},
    {"dtype": "no_such_dtype", "shape": [4], "offset": 0, "nbytes": 16},
])
def test_a_tensor_that_does_not_fit_the_buffer_is_a_protocol_error(meta):
    with pytest.raises(ProtocolError):
        tensor_in_buffer(meta, bytearray(64))


def test_an_empty_output_needs_no_buffer():
    empty = tensor_in_buffer({"dtype": "float32", "shape": [0, 3], "nbytes": 0}, None)
    assert empty.shape == (0, 3)
