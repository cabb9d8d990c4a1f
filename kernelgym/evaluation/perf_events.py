"""perf_event_open(2) through ctypes: the few constants of <linux/perf_event.h> the judge uses, the event
attributes, one event's ring buffer as the kernel writes it, and a set of events opened on a target's threads
and enabled together. The samplers built on it are evaluation/ip_sampler.py (where a process spent its CPU
time) and evaluation/call_probe.py (which functions it called)."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
import struct

# perf_event_open(2) and <linux/perf_event.h>, the few constants the judge uses.
SYSCALL_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}
PERF_TYPE_SOFTWARE = 1
PERF_COUNT_SW_TASK_CLOCK = 1
PERF_SAMPLE_IP = 1 << 0
PERF_SAMPLE_TID = 1 << 1
PERF_FLAG_FD_CLOEXEC = 1 << 3
PERF_EVENT_IOC_ENABLE = 0x2400  # _IO('$', 0)
PERF_EVENT_IOC_DISABLE = 0x2401  # _IO('$', 1)
# Bits of the attr's flag word (the C bitfield starting at `disabled`).
ATTR_DISABLED = 1 << 0
ATTR_INHERIT = 1 << 1
ATTR_EXCLUDE_KERNEL = 1 << 5
ATTR_EXCLUDE_HV = 1 << 6
ATTR_MMAP = 1 << 8
# Record types and the cpu mode in a record header's misc field.
PERF_RECORD_MMAP = 1
PERF_RECORD_LOST = 2
PERF_RECORD_SAMPLE = 9
MISC_CPUMODE_MASK = 7
MISC_KERNEL = 1
# perf_event_mmap_page: where the ring's head, tail and data area are described.
PAGE_DATA_HEAD = 1024
PAGE_DATA_TAIL = 1032
PAGE_DATA_OFFSET = 1040
ROOM_FOR_A_RECORD = 64


class PerfEventAttr(ctypes.Structure):
    # Up to sig_data (PERF_ATTR_SIZE_VER7, 128 bytes). A kernel that knows a shorter attr accepts this one
    # as long as the bytes it does not know are zero, which they are.
    _fields_ = [
        ("type", ctypes.c_uint32), ("size", ctypes.c_uint32), ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64), ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64), ("flags", ctypes.c_uint64),
        ("wakeup_events", ctypes.c_uint32), ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64), ("config2", ctypes.c_uint64),
        ("branch_sample_type", ctypes.c_uint64), ("sample_regs_user", ctypes.c_uint64),
        ("sample_stack_user", ctypes.c_uint32), ("clockid", ctypes.c_int32),
        ("sample_regs_intr", ctypes.c_uint64), ("aux_watermark", ctypes.c_uint32),
        ("sample_max_stack", ctypes.c_uint16), ("reserved_2", ctypes.c_uint16),
        ("aux_sample_size", ctypes.c_uint32), ("reserved_3", ctypes.c_uint32),
        ("sig_data", ctypes.c_uint64),
    ]


class PerfUnavailable(OSError):
    """The host refuses perf events to this process; the message is the one-line reason for the verdict."""


libc = ctypes.CDLL(None, use_errno=True)


def refusal_reason(err: int) -> str:
    """One line for the verdict's notes: what the host refused and which permission would allow it."""
    try:
        with open("/proc/sys/kernel/perf_event_paranoid") as setting:
            paranoid = setting.read().strip()
    except OSError:
        paranoid = "absent"
    name = errno.errorcode.get(err, str(err))
    if err in (errno.EACCES, errno.EPERM):
        return (f"perf_event_open refused ({name}): sampling another process's threads needs CAP_PERFMON "
                f"(or CAP_SYS_ADMIN) or ptrace access to it, and perf_event_paranoid <= 2 "
                f"(it is {paranoid})")
    return (f"perf_event_open not supported here ({name}): the kernel lacks perf events or software "
            f"sampling (perf_event_paranoid {paranoid}; a seccomp filter can also deny the syscall)")


REFUSED = {errno.EACCES, errno.EPERM, errno.ENOENT, errno.ENOSYS, errno.EOPNOTSUPP}


class Ring:
    """One event's fd and its mmap ring: a header page, then `pages` (a power of two) of records."""

    def __init__(self, tid: int, fd: int, pages: int):
        self.tid, self.fd = tid, fd
        length = (1 + pages) * mmap.PAGESIZE
        self.map = mmap.mmap(fd, length, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        offset, size = struct.unpack_from("<QQ", self.map, PAGE_DATA_OFFSET)
        # data_offset/data_size are filled in by kernels since 4.1; before that the data follows one page.
        self.data_offset = offset or mmap.PAGESIZE
        self.data_size = size or pages * mmap.PAGESIZE
        self.overflowed = False

    def take(self) -> bytes:
        """The records written since the last take, unwrapped; frees their space for the kernel.

        While the event runs this leans on x86's ordering (loads are not reordered with loads: data_head
        is read before the records it covers; the tail is stored after them); elsewhere call it only after
        DISABLE, as stop() does, when nothing is being written."""
        head, tail = struct.unpack_from("<QQ", self.map, PAGE_DATA_HEAD)
        start, end = tail % self.data_size, head % self.data_size
        base = self.data_offset
        # Less room than a sample record (24 bytes) plus a LOST record: the kernel has been dropping.
        self.overflowed |= self.data_size - (head - tail) < ROOM_FOR_A_RECORD
        if head - tail == 0:
            return b""
        if start < end:
            chunk = self.map[base + start:base + end]
        else:  # the records wrap around the end of the data area
            chunk = self.map[base + start:base + self.data_size] + self.map[base:base + end]
        struct.pack_into("<Q", self.map, PAGE_DATA_TAIL, head)
        return chunk

    def cpu_ns(self) -> int:
        """The event's count: the thread's CPU time (ns) while the event was enabled."""
        return struct.unpack("<Q", os.read(self.fd, 8))[0]

    def close(self) -> None:
        self.map.close()
        os.close(self.fd)


class PerfEvents:
    """Perf events opened on a target's threads, each with its ring; `refused` says why the host would not."""

    def __init__(self) -> None:
        self._rings: list[Ring] = []
        self.refused = ""  # why the host refused perf events, one line; empty while they work

    def _open_then_enable(self, open_events) -> bool:
        """Run `open_events` (which fills `_rings`), then enable every event together. False, with the
        reason in `refused` and nothing left open, when the host refuses; any other error is raised."""
        try:
            open_events()
            for ring in self._rings:
                fcntl.ioctl(ring.fd, PERF_EVENT_IOC_ENABLE, 0)
        except PerfUnavailable as refused:
            self.close()
            self.refused = str(refused)
            return False
        except BaseException:
            self.close()
            raise
        return True

    def close(self) -> None:
        for ring in self._rings:
            ring.close()
        self._rings = []
