"""Lazy attributes for package `__init__` files: heavy modules load on first use, not at import."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_getattr(package: str, names: dict[str, str]) -> Callable[[str], object]:
    """A module-level `__getattr__` that imports `names[attr]` (a module path) when `attr` is first read."""

    def __getattr__(name: str):
        if name in names:
            return getattr(importlib.import_module(names[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
