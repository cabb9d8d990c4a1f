"""The own libraries' loaded images (evaluation/own_images.py): the loader's image of a built library is its
code; the same file mapped again, or its code pages written, is not. Checked on this process's own maps."""

from __future__ import annotations

import ctypes
import mmap
import os
import shutil
import subprocess
from collections import Counter

import pytest

from kernelgym.evaluation.code_kinds import OTHER, OWN, Classifier
from kernelgym.evaluation.ip_sampler import executable_mappings_at
from kernelgym.evaluation.own_images import (
    PAGE,
    REMAPPED,
    WRITTEN,
    OwnImages,
    executable_segments,
    is_loaded_image,
    written_pages,
)


@pytest.fixture(scope="module")
def built_library(tmp_path_factory) -> str:
    if shutil.which("gcc") is None:
        pytest.skip("no gcc")
    folder = tmp_path_factory.mktemp("own_images")
    source = folder / "own.c"
    source.write_text("int own_add(int a, int b) { return a + b; }\n")
    library = folder / "libown.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(library), str(source)], check=True)
    return os.path.realpath(library)


def _mappings_of(path: str) -> list[tuple[int, int, str, int]]:
    return [m for m in executable_mappings_at(os.getpid()) if m[2] == path]


def test_executable_segments_of_an_elf_and_of_anything_else(built_library, tmp_path):
    assert executable_segments(built_library)
    segments = executable_segments(built_library)
    assert all(offset % PAGE == 0 and vaddr % PAGE == 0 for offset, vaddr in segments)
    (tmp_path / "not_elf.so").write_bytes(b"hello")
    assert executable_segments(str(tmp_path / "not_elf.so")) == []


def test_loaded_image_is_one_mapping_per_segment_at_one_bias():
    segments = [(0x1000, 0x1000), (0x9000, 0xa000)]
    base = 0x7F0000000000
    image = [(base + 0x1000, base + 0x5000, 0x1000), (base + 0xA000, base + 0xB000, 0x9000)]
    assert is_loaded_image(image, segments)
    assert not is_loaded_image(image[:1], segments)  # a segment missing
    assert not is_loaded_image(image + [(base + 0x20000, base + 0x21000, 0x1000)], segments)  # a second copy
    shifted = [image[0], (base + 0xB000, base + 0xC000, 0x9000)]
    assert not is_loaded_image(shifted, segments)  # two load biases
    assert not is_loaded_image([(base, base + 0x1000, 0x3000)], [(0x1000, 0x1000)])  # not the code's offset
    assert not is_loaded_image(image, [])  # no ELF


def test_written_pages_are_the_private_copies(built_library):
    with open(built_library, "rb") as f:
        copy = mmap.mmap(f.fileno(), 2 * PAGE, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    address = ctypes.addressof(ctypes.c_char.from_buffer(copy))
    assert copy[0:4] == b"\x7fELF"  # read: the file's page, present
    assert written_pages(os.getpid(), {address // PAGE}) == set()
    copy[0:4] = b"abcd"
    assert written_pages(os.getpid(), {address // PAGE}) == {address // PAGE}


def test_the_loaders_image_is_own_and_a_second_mapping_of_the_file_is_not(built_library):
    ctypes.CDLL(built_library)
    image = _mappings_of(built_library)
    assert len(image) == 1
    images = OwnImages(lambda: {built_library})
    start = image[0][0]
    vetted = images.vet(os.getpid(), executable_mappings_at(os.getpid()), Counter({start + 16: 5}))
    assert next(m for m in vetted if m[0] == start)[2] == built_library
    assert images.pinned[built_library] and not images.notes

    offset = executable_segments(built_library)[0][0]
    with open(built_library, "rb") as f:  # the same file mapped again, executable, after load
        again = mmap.mmap(f.fileno(), PAGE, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_EXEC,
                          offset=offset)
    try:
        later = images.vet(os.getpid(), executable_mappings_at(os.getpid()), Counter())
        paths = {m[2] for m in later if m[2] in (built_library, REMAPPED)}
        assert paths == {built_library, REMAPPED}  # the pinned image stays own, the new mapping is not
    finally:
        again.close()


def test_a_file_first_seen_twice_has_no_image_and_written_code_is_not_own(built_library, tmp_path):
    library = str(tmp_path / "libtwice.so")
    shutil.copy(built_library, library)
    offset = executable_segments(library)[0][0]
    with open(library, "rb") as f:
        first = mmap.mmap(f.fileno(), PAGE, flags=mmap.MAP_PRIVATE,
                          prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC, offset=offset)
    address = ctypes.addressof(ctypes.c_char.from_buffer(first))
    try:
        images = OwnImages(lambda: {os.path.realpath(library)})
        ips = Counter({address + 8: 3})
        vetted = images.vet(os.getpid(), executable_mappings_at(os.getpid()), ips)
        assert next(m for m in vetted if m[0] == address)[2] == library  # one image, its pages the file's
        first[0:1] = b"\xc3"  # code written after load: a private copy of the page
        vetted = images.vet(os.getpid(), executable_mappings_at(os.getpid()), ips)
        assert next(m for m in vetted if m[0] == address)[2] == WRITTEN

        with open(library, "rb") as f:
            second = mmap.mmap(f.fileno(), PAGE, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_EXEC,
                               offset=offset)
        try:
            fresh = OwnImages(lambda: {os.path.realpath(library)})  # first sees the file mapped twice
            vetted = fresh.vet(os.getpid(), executable_mappings_at(os.getpid()), Counter())
            assert not [m for m in vetted if m[2] == library] and fresh.notes
        finally:
            second.close()
    finally:
        first.close()


def test_relabelled_mappings_are_other_code():
    classifier = Classifier()
    assert classifier.classify(REMAPPED) == OTHER and classifier.classify(WRITTEN) == OTHER
    assert OWN != OTHER


def test_a_pinned_library_mapped_executable_again_has_no_image(built_library):
    ctypes.CDLL(built_library)
    images = OwnImages(lambda: {built_library})
    images.vet(os.getpid(), executable_mappings_at(os.getpid()), Counter())
    assert images.pinned[built_library]
    # the kernel's PERF_RECORD_MMAP of the file: its code copied in and mapped back, between two stops
    vetted = images.vet(os.getpid(), executable_mappings_at(os.getpid()), Counter(), [built_library])
    assert not [m for m in vetted if m[2] == built_library] and images.notes
    assert [m for m in vetted if m[2] == REMAPPED]


def test_the_sampler_reports_an_mprotect_to_exec(built_library):
    """What the rule above reads: the kernel's record of a sampled thread making a private copy of the file
    executable, though the copy is gone by the stop (so no difference between the maps shows it)."""
    from kernelgym.evaluation.ip_sampler import IpSampler

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the target: maps the library writable, makes it executable, unmaps it, waits
        try:
            os.read(read, 1)
            libc = ctypes.CDLL(None)
            libc.mmap.restype = ctypes.c_void_p
            libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                  ctypes.c_long]
            fd = os.open(built_library, os.O_RDONLY)
            address = libc.mmap(None, PAGE, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE, fd, 0)
            libc.mprotect(ctypes.c_void_p(address), ctypes.c_size_t(PAGE), mmap.PROT_READ | mmap.PROT_EXEC)
            libc.munmap(ctypes.c_void_p(address), ctypes.c_size_t(PAGE))
            os.read(read, 1)
        finally:
            os._exit(0)
    sampler = IpSampler(pid)
    try:
        if not sampler.start():
            pytest.skip(f"perf events refused: {sampler.refused}")
        os.write(write, b"g")
        import time

        time.sleep(0.3)
        samples = sampler.pause()
    finally:
        os.write(write, b"x")
        sampler.close()
        os.waitpid(pid, 0)
    assert built_library in samples.exec_mappings_added
