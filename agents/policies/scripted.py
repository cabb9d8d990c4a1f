"""ScriptedPolicy: fixed replies (in order, per episode attempt) or a function; for tests and demos."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kernelgym.agents.policy import BasePolicy, PolicyInfo, PolicyObservation


def fence(code: str) -> str:
    """A solution module as a reply: the code in one ```python block."""
    return f"```python\n{code.rstrip()}\n```\n"


class ScriptedPolicy(BasePolicy):
    """Replies from a list or a function `fn(observation, info) -> str`.

    With a list, the reply for an attempt is `replies[attempt]` (the attempt comes from `info["attempt"]`,
    else the observation's turn counter), and the last reply repeats once the list is used up. `cycle=True`
    instead starts the list again. Every call is recorded in `calls` (observation, info), for tests.
    """

    name = "scripted"

    def __init__(self, replies: Sequence[str] | Callable[[dict, dict], str], *, cycle: bool = False):
        if not callable(replies):
            replies = list(replies)
            if not replies:
                raise ValueError("ScriptedPolicy needs at least one reply")
        self.replies = replies
        self.cycle = cycle
        self.calls: list[tuple[dict[str, Any], dict[str, Any]]] = []
        self._lock = threading.Lock()

    def act(self, observation: PolicyObservation, info: PolicyInfo) -> str:
        with self._lock:
            self.calls.append((observation, info))
        if callable(self.replies):
            return self.replies(observation, info)
        attempt = int(info.get("attempt", observation.get("turn", 0)))
        n = len(self.replies)
        return self.replies[attempt % n if self.cycle else min(attempt, n - 1)]


def parse_scripted(spec: str) -> ScriptedPolicy:
    """`scripted:ITEM||ITEM||...`: each item a literal reply, or `@FILE` (a .py file is sent fenced)."""
    replies = []
    for item in spec.split("||"):
        if item.startswith("@"):
            path = Path(item[1:]).expanduser()
            text = path.read_text()
            replies.append(fence(text) if path.suffix == ".py" else text)
        else:
            replies.append(item.replace("\\n", "\n"))
    return ScriptedPolicy(replies)
