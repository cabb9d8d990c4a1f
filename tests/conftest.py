import pytest

from kernelgym.tasks import bundled


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
