"""kernelgym: multi-turn Gymnasium environments for LLM agents that write GPU kernels.

`import kernelgym` is light: it loads no LLM library, and it registers the environment ids.
"""

__version__ = "0.1.0"

from kernelgym.errors import KernelGymError  # noqa: E402
from kernelgym.tasks import Task, TaskSet  # noqa: E402

__all__ = ["KernelGymError", "Task", "TaskSet", "__version__"]
