"""Function names at file offsets of an ELF shared library (its .symtab, else .dynsym), read by the worker.

Used to tell apart, inside PyTorch's own libraries, the code that only allocates, fills or copies (what an
honest solution calls too: `torch::zeros_like` in its C++ wrapper) from ATen's compute. One table per library
and worker process, loaded on first use (libtorch_cpu.so: ~0.5 M symbols, read once in about a second).
"""

from __future__ import annotations

import bisect
import os
import struct
from functools import lru_cache

_PT_LOAD, _STT_FUNC, _SHT_SYMTAB, _SHT_DYNSYM = 1, 2, 2, 11


class ElfSymbols:
    """The FUNC symbols of one ELF64 little-endian file, by address; names read from the file on demand."""

    def __init__(self, path: str):
        self.path = path
        self.loads: list[tuple[int, int, int]] = []  # (file offset, size in file, vaddr) of each PT_LOAD
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.name_offsets: list[int] = []
        self._strtab = self._strtab_size = 0
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return
            phoff, shoff = struct.unpack_from("<QQ", head, 32)
            phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", head, 54)
            f.seek(phoff)
            for i in range(phnum):
                kind, _, offset, vaddr, _, filesz = struct.unpack_from("<IIQQQQ", f.read(phentsize))
                if kind == _PT_LOAD:
                    self.loads.append((offset, filesz, vaddr))
            f.seek(shoff)
            sections = [struct.unpack_from("<IIQQQQIIQQ", f.read(shentsize)) for _ in range(shnum)]
            self._load_table(f, sections)

    def _load_table(self, f, sections) -> None:
        import numpy as np

        table = next((s for s in sections if s[1] == _SHT_SYMTAB), None) or \
            next((s for s in sections if s[1] == _SHT_DYNSYM), None)
        if table is None:
            return
        _, _, _, _, offset, size, link, _, _, _ = table
        self._strtab, self._strtab_size = sections[link][4], sections[link][5]
        f.seek(offset)
        raw = np.frombuffer(f.read(size), dtype=np.dtype([("name", "<u4"), ("info", "u1"), ("other", "u1"),
                                                          ("shndx", "<u2"), ("value", "<u8"),
                                                          ("size", "<u8")]))
        funcs = raw[((raw["info"] & 0xF) == _STT_FUNC) & (raw["value"] != 0)]
        funcs = funcs[np.argsort(funcs["value"], kind="stable")]
        self.starts = funcs["value"].tolist()
        self.ends = (funcs["value"] + np.maximum(funcs["size"], 1)).tolist()
        self.name_offsets = funcs["name"].tolist()

    def name_at(self, file_offset: int) -> str:
        """The (mangled) name of the function holding this file offset, or "" if none does."""
        vaddr = next((file_offset - off + va for off, size, va in self.loads
                      if off <= file_offset < off + size), None)
        if vaddr is None or not self.starts:
            return ""
        i = bisect.bisect_right(self.starts, vaddr) - 1
        if i < 0 or vaddr >= self.ends[i]:
            return ""
        return self._name(self.name_offsets[i])

    def file_offsets(self, names) -> dict[str, int]:
        """The file offset of each named function's first instruction (those the table holds)."""
        wanted = set(names)
        with open(self.path, "rb") as f:
            f.seek(self._strtab)
            strings = f.read(self._strtab_size)
        found = {}
        for start, name_offset in zip(self.starts, self.name_offsets, strict=True):
            name = strings[name_offset:strings.find(b"\0", name_offset)].decode("ascii", "replace")
            if name in wanted and name not in found:
                offset = next((start - va + off for off, size, va in self.loads if va <= start < va + size),
                              None)
                if offset is not None:
                    found[name] = offset
        return found

    @lru_cache(maxsize=65536)  # noqa: B019 - one table per library for the worker's life, by design
    def _name(self, offset: int) -> str:
        with open(self.path, "rb") as f:
            f.seek(self._strtab + offset)
            data = f.read(4096)
        return data.split(b"\0", 1)[0].decode("ascii", "replace")


@lru_cache(maxsize=16)
def symbols(path: str) -> ElfSymbols | None:
    try:
        return ElfSymbols(os.path.realpath(path))
    except (OSError, struct.error, ValueError):
        return None
