"""Where the worker puts the candidate's outputs for the reference to check (CPU).

The worker reads each output straight out of the frozen candidate's memory (/proc/PID/mem) into one memfd,
and passes that memfd to the reference process with a single Compare per batch: one copy of each output, no
socket traffic proportional to its size. Only the two trusted processes ever hold it.
"""

from __future__ import annotations

import mmap
import os

ALIGN = 64  # every output starts on a 64-byte boundary: any dtype can view it in place


class Readback:
    """A growable memfd, mapped in the worker; `fd` travels to the reference with each Compare."""

    def __init__(self) -> None:
        self.fd = os.memfd_create("kernelgym-readback", os.MFD_CLOEXEC)
        self.size = 0
        self.view: mmap.mmap | None = None
        self.used = 0

    def reset(self, need: int) -> None:
        """Room for `need` bytes (rounded up per output by the caller), from offset 0."""
        if need > self.size:
            if self.view is not None:
                self.view.close()
            self.size = max(need, 2 * self.size, 1 << 20)
            os.ftruncate(self.fd, self.size)
            self.view = mmap.mmap(self.fd, self.size, flags=mmap.MAP_SHARED,
                                  prot=mmap.PROT_READ | mmap.PROT_WRITE)
        self.used = 0

    def take(self, nbytes: int) -> tuple[int, memoryview]:
        """The next slot of `nbytes`: its offset and a writable view of it."""
        offset = self.used
        self.used += (nbytes + ALIGN - 1) // ALIGN * ALIGN
        if self.used > self.size:
            raise ValueError("readback buffer too small")
        return offset, memoryview(self.view)[offset:offset + nbytes]

    def close(self) -> None:
        if self.view is not None:
            self.view.close()
            self.view = None
        os.close(self.fd)


def slot_size(nbytes: int) -> int:
    return (nbytes + ALIGN - 1) // ALIGN * ALIGN


def map_readback(fds: list[int]):
    """The reference's side: the worker's readback memfd, mapped copy-on-write (a comparison never writes; no
    copy is made)."""
    if not fds:
        return None
    try:
        size = os.fstat(fds[0]).st_size
        return mmap.mmap(fds[0], size, flags=mmap.MAP_PRIVATE,
                         prot=mmap.PROT_READ | mmap.PROT_WRITE) if size else None
    finally:
        for fd in fds:
            os.close(fd)
