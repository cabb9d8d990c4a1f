"""Which executable mappings of the solution's own libraries hold its own code: the image the dynamic loader
made of each library, pinned when first seen, with no page written since.

A file path in /proc/PID/maps says only which file a mapping came from, not how it came or what its pages hold
now. A red team's library mapped its own file again, privately, over a span as large as libtorch's image,
copied libtorch in and ran its MKL there: every sample fell in mappings of the solution's file, and the own
code share read 100% (tests/adversarial/cpp_vendor_blas_copied_into_own_mapping.py). So a sample counts as
own code only where

- the mapping is one of the library's image, as the loader lays it out from the ELF program headers: one
  mapping per executable PT_LOAD segment, at its page-aligned file offset, all at one load bias. That image
  is pinned (range, offset, inode) the first time the worker sees the file mapped, the candidate frozen;
  any other executable mapping of the file, then or later, is not the image (`REMAPPED`), and a file first
  seen with more than one image has none. Once pinned, a file the kernel reports mapped executable again
  (PERF_RECORD_MMAP: mmap or mprotect with PROT_EXEC, by any sampled thread) has no image from then on:
  the loader maps a library once, and code copied in, run and mapped back clean before the batch's end
  would otherwise look like the pinned image at stop;
- the sampled page is still the file's: /proc/PID/pagemap says whether a present page is a file page or an
  anonymous copy (a private file page once written is one), and a swapped page is anonymous. A written
  code page is not the solution's built code (`WRITTEN`).

Samples relabelled so count as other code (evaluation/code_kinds.py), and the usual shares decide.
"""

from __future__ import annotations

import os
import struct
from collections import Counter

REMAPPED = "[own library mapped outside its loaded image]"
WRITTEN = "[own library's code written after load]"

PAGE = os.sysconf("SC_PAGE_SIZE")
_PT_LOAD, _PF_X = 1, 1
_PRESENT, _SWAPPED, _FILE_PAGE = 1 << 63, 1 << 62, 1 << 61

Mapping = tuple[int, int, str, int]  # start, end, path, file offset (ip_sampler.executable_mappings_at)


def executable_segments(path: str) -> list[tuple[int, int]]:
    """(page-aligned file offset, page-aligned vaddr) of each executable PT_LOAD of an ELF64 little-endian
    file: where the loader maps its code. Empty when the file is no such ELF."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return []
            phoff = struct.unpack_from("<Q", head, 32)[0]
            phentsize, phnum = struct.unpack_from("<HH", head, 54)
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except OSError:
        return []
    found = []
    for i in range(phnum):
        kind, flags, offset, vaddr = struct.unpack_from("<IIQQ", table, i * phentsize)
        if kind == _PT_LOAD and flags & _PF_X:
            found.append((offset - offset % PAGE, vaddr - vaddr % PAGE))
    return found


def _inodes(pid: int, paths: set[str]) -> dict[tuple[int, int, int], int]:
    """(start, end, offset) -> inode of each executable mapping of the given files."""
    found = {}
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and "x" in parts[1] and parts[5].strip() in paths:
                start, end = (int(a, 16) for a in parts[0].split("-"))
                found[(start, end, int(parts[2], 16))] = int(parts[4])
    return found


def is_loaded_image(mappings: list[tuple[int, int, int]], segments: list[tuple[int, int]]) -> bool:
    """Whether a file's executable mappings (start, end, offset) are exactly the loader's image of it: one
    per executable segment, at the segment's file offset, all at one load bias."""
    if not segments or len(mappings) != len(segments):
        return False
    by_offset = {offset: vaddr for offset, vaddr in segments}
    biases = {start - by_offset[offset] for start, _, offset in mappings if offset in by_offset}
    offsets = {offset for _, _, offset in mappings}
    return len(biases) == 1 and offsets == set(by_offset)


def written_pages(pid: int, pages: set[int]) -> set[int]:
    """The pages (address // PAGE) that hold an anonymous copy, not the file's page: written since mapped.
    Unreadable entries count as written (pagemap needs the same access as the maps the samples used)."""
    written = set()
    try:
        with open(f"/proc/{pid}/pagemap", "rb") as pagemap:
            for page in sorted(pages):
                pagemap.seek(page * 8)
                raw = pagemap.read(8)
                entry = struct.unpack("<Q", raw)[0] if len(raw) == 8 else 0
                if entry & _SWAPPED or (entry & _PRESENT and not entry & _FILE_PAGE):
                    written.add(page)
    except OSError:
        return set(pages)
    return written


class OwnImages:
    """The loaded images of the solution's own libraries in one candidate process, pinned when first seen."""

    def __init__(self, own_paths) -> None:
        """own_paths: gives the real paths of the solution's built libraries (the set grows with builds)."""
        self._own_paths = own_paths
        # path -> the image's mappings (start, end, offset, inode); none when first seen as no one image
        self.pinned: dict[str, frozenset[tuple[int, int, int, int]]] = {}
        self.notes: list[str] = []  # why a library's mappings were not taken as its image

    def vet(self, pid: int, mappings: list[Mapping], ips: Counter, mapped_meanwhile=()) -> list[Mapping]:
        """The mappings, with those of own libraries that do not hold own code relabelled (REMAPPED or
        WRITTEN). Call with the process frozen: its maps then are what its samples ran in. mapped_meanwhile:
        the files the kernel reported mapped executable since the last call."""
        own = self._own_paths()
        for path in set(mapped_meanwhile) & {p for p, image in self.pinned.items() if image}:
            self.pinned[path] = frozenset()
            self.notes.append(f"{os.path.basename(path)}: mapped executable again after it was loaded: "
                              "none of its mappings is its code from then on")
        mine = {m[2] for m in mappings if m[2].startswith("/") and os.path.realpath(m[2]) in own}
        if not mine:
            return mappings
        inodes = _inodes(pid, mine)
        for path in mine - set(self.pinned):
            self._pin(path, [m for m in mappings if m[2] == path], inodes)
        vetted = []
        for start, end, path, offset in mappings:
            if path in mine:
                key = (start, end, offset, inodes.get((start, end, offset), -1))
                if key not in self.pinned[path]:
                    path = REMAPPED
                elif written_pages(pid, {ip // PAGE for ip in ips if start <= ip < end}):
                    path = WRITTEN
            vetted.append((start, end, path, offset))
        return vetted

    def _pin(self, path: str, mappings: list[Mapping], inodes: dict) -> None:
        ranges = [(start, end, offset) for start, end, _, offset in mappings]
        if is_loaded_image(ranges, executable_segments(os.path.realpath(path))):
            self.pinned[path] = frozenset((*r, inodes.get(r, -1)) for r in ranges)
        else:
            self.pinned[path] = frozenset()
            self.notes.append(f"{os.path.basename(path)}: its executable mappings when first seen "
                              f"({len(ranges)}) are not one loaded image of the file: none is its code")
