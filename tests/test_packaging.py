"""The distribution maps envs/, agents/ and skill_store/ under kernelgym and lists every package."""

from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
MAPPED = {"kernelgym": "kernelgym", "kernelgym.envs": "envs", "kernelgym.agents": "agents",
          "kernelgym.skill_store": "skill_store"}


def _declared():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_is_listed():
    declared = set(_declared()["packages"])
    found = set()
    for package, folder in MAPPED.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([package, *rel.parts]) if rel.parts else package)
    missing = {p for p in found - declared if not p.startswith("kernelgym.suites")}
    assert not missing, f"add to [tool.setuptools] packages: {sorted(missing)}"


# Top-level plugin names for a framework's loader that takes no dotted path; each is kernelgym_<name>.
PLUGINS = {"kernelgym_verifiers"}


def test_no_generic_top_level_names():
    setuptools = _declared()
    assert all(p == "kernelgym" or p.startswith("kernelgym.") or p in PLUGINS for p in setuptools["packages"])
    assert all(p.startswith("kernelgym_") and (ROOT / p / "__init__.py").is_file() for p in PLUGINS)
    assert setuptools["package-dir"] == MAPPED


def test_import_kernelgym_stays_light():
    import subprocess
    import sys

    code = ("import sys, kernelgym; "
            "print(sorted(m for m in ('transformers', 'trl', 'openai', 'datasets') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_every_data_folder_is_listed_so_setuptools_does_not_warn():
    # setuptools warns ("Package ... is absent from the `packages` configuration") for each folder that ships
    # package data but is not a listed package; the data folders are listed as namespace packages instead.
    setuptools = _declared()
    declared = set(setuptools["packages"])
    shipped = set()
    for package, patterns in setuptools["package-data"].items():
        folder = ROOT / MAPPED.get(package, package.replace(".", "/"))
        for pattern in patterns:
            for path in folder.glob(pattern):
                rel = path.parent.relative_to(folder)
                shipped.add(".".join([package, *rel.parts]))
    missing = sorted(shipped - declared)
    assert shipped and not missing, f"add to [tool.setuptools] packages: {missing}"
