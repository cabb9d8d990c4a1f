"""Fixtures for the environment tests: a KernelBench-layout folder and a task with a slow reference."""

from __future__ import annotations

import pytest
from kg_env_helpers import SLOW_RELU, write_kernelbench

import kernelgym  # noqa: F401  (registers the ids)
from kernelgym.tasks import task_from_source


@pytest.fixture(scope="session")
def kernelbench_root(tmp_path_factory):
    return write_kernelbench(tmp_path_factory.mktemp("kernelbench"))


@pytest.fixture(scope="session")
def slow_relu_task():
    return task_from_source(SLOW_RELU, suite="user", level=1, file_name="1_SlowReLU.py")
