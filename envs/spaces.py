"""The observation and action spaces, and fitting arbitrary text into them.

Gymnasium's default Text charset is 62 alphanumerics, which rejects code; ours is ASCII's printable set
(letters, digits, punctuation, whitespace). Text that leaves the environment is first mapped into that set
(common Unicode punctuation to its ASCII look-alike, anything else to '?'), because vector environments
copy observations through shared memory by charset index and would fail on an unknown character.

`CodeText` also fixes a gymnasium limitation: AsyncVectorEnv reads its shared-memory observations once, at
construction, which for Text (decoded into str, not a numpy view) freezes them at the initial zeros. Our
read returns a live view instead, decoded when accessed or copied, like the numpy views of Box spaces.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils.shared_memory import read_from_shared_memory

CHARSET = string.printable
MAX_TEXT = 200_000
# Speedups in observations are clipped here: a Box needs finite bounds, and no honest kernel gets near it.
SPEEDUP_LIMIT = 1000.0

_CHARSET_SET = frozenset(CHARSET)
_ASCII_LOOKALIKES = str.maketrans({
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2032": "'",
    "\u2013": "-", "\u2014": "-", "\u2212": "-", "\u2010": "-", "\u2011": "-", "\u2026": "...", "\u00a0": " ",
    "\u2009": " ", "\u202f": " ", "\u00d7": "x", "\u2264": "<=", "\u2265": ">=", "\u2192": "->",
    "\u00b5": "u", "\u03bc": "u", "\u2248": "~", "\u00b1": "+-", "\u2022": "*", "\u00b7": "*",
})


class CodeText(spaces.Text):
    """gymnasium's Text over `CHARSET`, from empty to `max_length` characters."""

    def __init__(self, max_length: int = MAX_TEXT, *, seed: Any = None):
        super().__init__(max_length=max_length, min_length=0, charset=CHARSET, seed=seed)


class SharedTexts(Sequence):
    """The strings of one Text field of a vector env's shared memory, decoded on access (a live view)."""

    def __init__(self, space: spaces.Text, shared_memory: Any, n: int):
        self._data = np.frombuffer(shared_memory.get_obj(), dtype=np.int32).reshape((n, space.max_length))
        self._size = len(space.character_set)
        self._lookup = np.frombuffer("".join(space.character_list).encode("ascii"), dtype=np.uint8)

    def _decode(self, row: np.ndarray) -> str:
        return self._lookup[row[row < self._size]].tobytes().decode("ascii")

    def __getitem__(self, index):
        if isinstance(index, slice):
            return tuple(self._decode(row) for row in self._data[index])
        return self._decode(self._data[index])

    def __len__(self) -> int:
        return len(self._data)

    def __deepcopy__(self, memo) -> tuple[str, ...]:
        return tuple(self)  # AsyncVectorEnv(copy=True) deep-copies what it returns: a snapshot

    def __eq__(self, other) -> bool:
        return tuple(self) == (tuple(other) if isinstance(other, Sequence) else other)

    def __repr__(self) -> str:
        return f"SharedTexts({tuple(s[:40] for s in self)!r})"


@read_from_shared_memory.register(CodeText)
def _read_code_text(space: CodeText, shared_memory: Any, n: int = 1) -> SharedTexts:
    return SharedTexts(space, shared_memory, n)


def text_space(max_length: int = MAX_TEXT) -> CodeText:
    return CodeText(max_length)


def speedup_space() -> spaces.Box:
    return spaces.Box(low=0.0, high=SPEEDUP_LIMIT, shape=(1,), dtype=np.float32)


def observation_space(max_turns: int, max_length: int = MAX_TEXT) -> spaces.Dict:
    return spaces.Dict({
        "prompt": text_space(max_length),
        "feedback": text_space(max_length),
        "turn": spaces.Discrete(max_turns + 1),  # turns taken so far, 0 right after reset
        "last_speedup": speedup_space(),
        "best_speedup": speedup_space(),
    })


def action_space(max_length: int = MAX_TEXT) -> spaces.Text:
    # The action is the model's whole reply. The environment accepts any string (Unicode included);
    # the charset only shapes what `sample()` produces.
    return text_space(max_length)


def fit_text(text: str, max_length: int = MAX_TEXT) -> str:
    """Map `text` into the charset and cut it to `max_length`, saying where it was cut."""
    if not all(c in _CHARSET_SET for c in text):
        text = "".join(c if c in _CHARSET_SET else "?" for c in text.translate(_ASCII_LOOKALIKES))
    if len(text) > max_length:
        marker = "\n... [truncated]"
        text = text[: max(0, max_length - len(marker))] + marker[: max_length]
    return text


def speedup_array(value: float | None) -> np.ndarray:
    """A fresh float32 array of shape (1,) (fresh: callers keep what they are given)."""
    v = 0.0 if value is None or not np.isfinite(value) else float(value)
    return np.array([min(max(v, 0.0), SPEEDUP_LIMIT)], dtype=np.float32)
