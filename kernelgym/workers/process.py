"""A forked evaluation process, seen from the trusted worker: start, talk, time out, kill, read its output."""

from __future__ import annotations

import os
import signal
import socket
import time

from kernelgym.workers import protocol
from kernelgym.workers.child import ChildJob, run_candidate
from kernelgym.workers.sandbox import SandboxConfig, enter

OUTPUT_TAIL_BYTES = 4000


class EvalProcess:
    """One forked evaluation process (reference or candidate) and the trusted side's end of its socket."""

    def __init__(self, target, job: ChildJob, eval_dir: str, sandbox: SandboxConfig, uses_gpu: bool):
        self.log_path = os.path.join(eval_dir, "output.log")
        parent_sock, child_sock = socket.socketpair()
        log_fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        pid = os.fork()
        if pid == 0:  # the evaluation process
            code = 0
            try:
                parent_sock.close()
                notes = enter(eval_dir, log_fd, sandbox, uses_gpu)
                protocol.send(child_sock, "hello", {"notes": notes})
                if target is run_candidate:
                    run_candidate(job, child_sock, eval_dir)
                else:
                    target(job, child_sock)
            except BaseException:
                code = 70
            finally:
                os._exit(code)
        os.close(log_fd)
        child_sock.close()
        self.pid = pid
        self.sock = parent_sock
        self.status: int | None = None

    def recv(self, deadline: float) -> tuple[str, dict, list[bytes]]:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        self.sock.settimeout(remaining)
        try:
            return protocol.recv(self.sock)
        except (socket.timeout, TimeoutError):
            raise TimeoutError from None
        except (protocol.ProtocolError, OSError) as exc:
            raise Died(str(exc)) from None

    def send(self, kind: str, meta: dict | None = None) -> None:
        try:
            protocol.send(self.sock, kind, meta)
        except OSError as exc:
            raise Died(str(exc)) from None

    def kill(self) -> None:
        try:  # the whole group: whatever the candidate started dies with it
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.wait()

    def wait(self, timeout: float = 5.0) -> int | None:
        if self.status is not None:
            return self.status
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = status
                return status
            time.sleep(0.005)
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        _, self.status = os.waitpid(self.pid, 0)
        return self.status

    def close(self) -> None:
        self.sock.close()
        if self.status is None:
            self.kill()
        try:  # anything the candidate left running in its process group
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def output_tail(self) -> str:
        try:
            size = os.path.getsize(self.log_path)
            with open(self.log_path, "rb") as f:
                if size <= OUTPUT_TAIL_BYTES:
                    return f.read().decode("utf-8", "replace")
                head = f.read(OUTPUT_TAIL_BYTES // 2).decode("utf-8", "replace")
                f.seek(size - OUTPUT_TAIL_BYTES // 2)
                tail = f.read().decode("utf-8", "replace")
            return f"{head}\n... [{size - OUTPUT_TAIL_BYTES} bytes of output cut] ...\n{tail}"
        except OSError:
            return ""

    def death(self) -> str:
        status = self.wait()
        if status is None:
            return "the process vanished"
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            return f"killed by signal {signal.Signals(sig).name}" if sig in signal.valid_signals() else f"signal {sig}"
        return f"exited with status {os.WEXITSTATUS(status)}"


class Died(Exception):
    """The process hung up or exited: the caller reads `death()` for how."""
