"""The distribution: `python -m build` makes an sdist and a wheel (built from the sdist); the wheel ships
every file of the package folders, and installed alone into a fresh venv it makes an environment and judges a
bundled solution with no source tree on the path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

import kernelgym

ROOT = Path(__file__).resolve().parents[1]
# Source folder -> where it lands in the wheel (pyproject.toml's package-dir).
FOLDERS = {"kernelgym": "kernelgym", "envs": "kernelgym/envs", "agents": "kernelgym/agents",
           "skill_store": "kernelgym/skill_store", "kernelgym_verifiers": "kernelgym_verifiers"}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    # Built from a copy of the tracked files: a source tree's leftovers (an old *.egg-info/SOURCES.txt lists
    # every file it ever shipped) would hide a file that pyproject.toml no longer ships.
    source = tmp_path_factory.mktemp("source")
    for path in _tracked_files():
        if (ROOT / path).is_file():
            (source / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / path, source / path)
    out = tmp_path_factory.mktemp("dist")
    # --no-isolation: the build backend (setuptools) comes from this venv, no download.
    command = [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)]
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def _wheel(dist: Path) -> Path:
    (wheel,) = dist.glob(f"kernelgym-{kernelgym.__version__}-*.whl")
    return wheel


def _tracked_files(*folders: str) -> list[str]:
    done = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", *folders], check=False,
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip("not a git checkout: the tracked files are unknown")
    return [path for path in done.stdout.split("\0") if path]


def test_build_makes_an_sdist_and_a_wheel(dist):
    assert (dist / f"kernelgym-{kernelgym.__version__}.tar.gz").is_file()
    assert _wheel(dist).is_file()


def test_the_wheel_holds_every_data_folder_and_file(dist):
    shipped = set(zipfile.ZipFile(_wheel(dist)).namelist())
    missing = []
    for path in _tracked_files(*FOLDERS):
        if path.endswith(".md"):  # folder READMEs are documentation, not package data
            continue
        top, _, rest = path.partition("/")
        if f"{FOLDERS[top]}/{rest}" not in shipped:
            missing.append(path)
    assert not missing, f"not in the wheel (pyproject.toml's packages / package-data): {missing[:20]}"
    data_folders = {"kernelgym/suites/level4", "kernelgym/solutions/cpp/kernelbench/level4",
                    "kernelgym/skill_store/seeds", "kernelgym/suites/backward/level1"}
    assert all(any(name.startswith(folder + "/") for name in shipped) for folder in data_folders)


def test_a_fresh_venv_with_only_the_wheel_makes_an_env_and_judges_a_solution(dist, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # The dependencies (torch, gymnasium, ...) come from this test's venv, added as a plain path after the
    # fresh venv's own: its .pth files (the editable install's finder) are not run, so kernelgym can only come
    # from the wheel. Nothing is downloaded.
    Path(site, "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                    "--no-index", str(_wheel(dist))], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    work = tmp_path / "elsewhere"  # not the source tree
    work.mkdir()

    def run(*argv: str) -> str:
        done = subprocess.run(list(argv), check=False, cwd=work, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done.stdout

    code = ("import kernelgym, gymnasium as gym\n"
            "env = gym.make('KernelGym-L1-v0', backend='cpp', size='cpu')\n"
            "obs, info = env.reset(seed=0)\n"
            "print(kernelgym.__file__); print(info['task_id'])\n")
    where, task = run(str(python), "-c", code).split()
    assert where.startswith(site) and task.startswith("bundled/L1/")
    assert run(str(venv / "bin" / "kernelgym"), "--version").strip() == f"kernelgym {kernelgym.__version__}"
    solution = Path(where).parent / "solutions" / "cpp" / "level1" / "1_ReLU.py"
    out = run(str(venv / "bin" / "kernelgym"), "eval", "--task", "L1/1_ReLU", str(solution))
    assert "Verdict: ok" in out
