"""A CPU candidate cannot drop the pages it wrote in its inputs' mapping (issue 43): the judge reads its page
tables for written input pages, and a dropped private copy maps the sealed file's original again."""

from __future__ import annotations

import subprocess
import sys

PROBE = r"""
import ctypes, mmap, os
from kernelgym.workers.sandbox import keep_written_pages

libc = ctypes.CDLL(None, use_errno=True)
fd = os.memfd_create("inputs")
os.write(fd, b"\x01" * mmap.PAGESIZE)
arena = mmap.mmap(fd, mmap.PAGESIZE, flags=mmap.MAP_PRIVATE)  # as the candidate maps its inputs
address = ctypes.addressof(ctypes.c_char.from_buffer(arena))
assert keep_written_pages() == []
arena[0] = 7  # the candidate's write: a private copy of the page
dropped = libc.madvise(ctypes.c_void_p(address), mmap.PAGESIZE, 4)  # MADV_DONTNEED
print(dropped, ctypes.get_errno(), arena[0], libc.madvise(ctypes.c_void_p(address), mmap.PAGESIZE, 3))
"""


def test_a_written_input_page_cannot_be_dropped():
    out = subprocess.run([sys.executable, "-c", PROBE], check=False, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    refused, errno, value, willneed = out.stdout.split()
    assert (refused, errno) == ("-1", "1")  # EPERM: the write stays where the worker's page-table read is
    assert value == "7"
    assert willneed == "0"  # advice that drops nothing still works
