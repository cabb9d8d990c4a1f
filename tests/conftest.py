import os

import pytest

from kernelgym.tasks import bundled
from kernelgym.tasks.folders import REGISTRY_ENV


@pytest.fixture(scope="session", autouse=True)
def task_folder_registry(tmp_path_factory):
    """The file that remembers task folders (kernelgym.tasks.folders): the tests' own, not the user's."""
    path = tmp_path_factory.mktemp("registry") / "task_folders.json"
    before = os.environ.get(REGISTRY_ENV)
    os.environ[REGISTRY_ENV] = str(path)
    yield path
    if before is None:
        os.environ.pop(REGISTRY_ENV, None)
    else:
        os.environ[REGISTRY_ENV] = before


@pytest.fixture(scope="session")
def pool():
    from kernelgym.workers.pool import EvalPool

    with EvalPool(workers=2) as shared:
        yield shared


@pytest.fixture(scope="session")
def relu_task():
    return bundled().get("L1/1_ReLU")


@pytest.fixture(scope="session")
def relu_solution():
    from pathlib import Path

    import kernelgym

    return (Path(kernelgym.__file__).parent / "solutions" / "cpp" / "level1" / "1_ReLU.py").read_text()
