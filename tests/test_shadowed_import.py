"""A folder named kernelgym in the working directory hides the package: the import says so."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], check=False, cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_the_checkout_folder_named_kernelgym_is_reported(tmp_path):
    (tmp_path / "kernelgym").symlink_to(
        ROOT
    )  # what `git clone .../kernelgym` leaves next to the user's scripts
    run = _python("import kernelgym, kernelgym.envs; print(kernelgym.__file__)", tmp_path)
    if (
        run.returncode == 0
    ):  # a regular (non-editable) install is found ahead of a namespace folder: no shadow
        assert run.stdout.strip().endswith("__init__.py")
    else:
        assert "instead of the installed kernelgym package" in run.stderr and "kernelgym" in run.stderr


@pytest.mark.parametrize("submodule", ["kernelgym.envs", "kernelgym.tasks"])
def test_an_unrelated_folder_named_kernelgym_is_reported_when_a_module_loads(tmp_path, submodule):
    (tmp_path / "kernelgym").mkdir()
    run = _python(f"import kernelgym, {submodule}; print(kernelgym.__file__)", tmp_path)
    if (
        run.returncode == 0
    ):  # a regular (non-editable) install is found ahead of a namespace folder: no shadow
        assert run.stdout.strip().endswith("__init__.py")
    else:
        assert (
            "instead of the installed kernelgym package" in run.stderr
            and str(tmp_path / "kernelgym") in run.stderr
        )


def test_no_folder_no_complaint(tmp_path):
    run = _python("import kernelgym, gymnasium; assert 'KernelGym-L1-v0' in gymnasium.registry", tmp_path)
    assert run.returncode == 0, run.stderr
