"""Detect a folder named `kernelgym` in the working directory that hides the installed package.

Python imports such a folder (without `__init__.py`) as an empty namespace package ahead of an editable
install, so `import kernelgym` "works" but registers no environment and `gym.make` says the id does not
exist. Submodules still load through the editable finder, so the first one that runs says what happened.
"""

from __future__ import annotations

import sys


def shadowing_folder() -> str | None:
    """The folder that `kernelgym` was imported from when it is not the real package, else None."""
    package = sys.modules.get("kernelgym")
    if package is None or getattr(package, "__file__", None):
        return None
    return ", ".join(str(p) for p in getattr(package, "__path__", [])) or "an unknown folder"


def shadow_message(folder: str) -> str:
    return (
        f"`import kernelgym` found the folder {folder} instead of the installed kernelgym package (a folder "
        "named kernelgym in the working directory hides it), so no environment was registered and "
        "gym.make would say the id does not exist. Run Python from another directory, or rename that folder."
    )


def check_not_shadowed() -> None:
    folder = shadowing_folder()
    if folder is not None:
        raise ImportError(shadow_message(folder))
