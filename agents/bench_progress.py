"""A bench's episodes run on `concurrency` threads, at most that many in flight, with a progress bar."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Any


def print_to(console, text: str) -> None:
    if console is None:
        from rich.console import Console

        console = Console()
    console.print(text)


class BenchProgress:
    """Counts finished episodes and shows them on a rich progress bar (when `show`)."""

    def __init__(self, total: int, skipped: int, show: bool, console=None):
        self.correct = self.failed = self.ran = 0
        self._bar = None
        if show:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                                 TextColumn("{task.fields[status]}"), console=console)
            self._bar.start()
            self._job = self._bar.add_task("bench", total=total + skipped, completed=skipped, status="")

    def finished(self, data: dict[str, Any] | None) -> None:
        """One episode ended: its record, or None when it raised."""
        self.ran += 1
        if data is None:
            self.failed += 1
        elif data.get("correct"):
            self.correct += 1
        if self._bar is not None:
            status = f"correct {self.correct}/{self.ran}" + (f", errors {self.failed}" if self.failed else "")
            self._bar.update(self._job, advance=1, status=status)

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def run_episodes(todo: list[tuple[str, int]], one: Callable[[str, int], dict[str, Any] | None],
                 concurrency: int, progress: bool, console, skipped: int,
                 stop: Callable[[], Any] = lambda: None) -> int:
    """Run `one(task, sample)` for each item on `concurrency` threads, with a rich progress bar; no new item
    starts once `stop()` is true."""
    if not todo:
        if progress:
            print_to(console, f"nothing to run: all {skipped} episode(s) already finished")
        return 0
    counter = BenchProgress(len(todo), skipped, progress, console)
    executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="kernelgym-bench")
    try:
        pending = set()
        for item in todo:  # keep at most `concurrency` in flight, so an interrupt leaves little half-done
            if stop():
                break
            pending.add(executor.submit(one, *item))
            if len(pending) >= concurrency:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    counter.finished(f.result())
        for f in pending:
            counter.finished(f.result())
    except KeyboardInterrupt:
        if progress:
            print_to(console, "interrupted: finishing the episodes in flight (they are kept); "
                              "Ctrl-C again abandons them")
        raise
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
        counter.stop()
    return counter.ran

