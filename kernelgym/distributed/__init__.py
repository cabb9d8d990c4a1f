"""Distributed evaluation on Ray (`pip install 'kernelgym[dist]'`): `RayEvalPool` has EvalPool's interface.

```python
from kernelgym.distributed import RayEvalPool

with RayEvalPool(address="auto") as pool:          # one actor per GPU of the cluster
    env = gym.make("KernelGym-L1-v0", pool=pool)
```

Ray is imported when a pool is made, never by `import kernelgym` or `import kernelgym.distributed`.
"""

from __future__ import annotations

from kernelgym._lazy import lazy_getattr

_LAZY = {
    "RayEvalPool": "kernelgym.distributed.pool",
    "RayPoolConfig": "kernelgym.distributed.config",
    "parse_evaluator": "kernelgym.distributed.config",
    "make_evaluator": "kernelgym.distributed.evaluator",
}

__getattr__ = lazy_getattr("kernelgym.distributed", _LAZY)

__all__ = ["RayEvalPool", "RayPoolConfig", "make_evaluator", "parse_evaluator"]
