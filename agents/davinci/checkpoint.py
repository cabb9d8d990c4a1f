"""Optimizer state on disk in files of bounded size, so a checkpoint can leave a machine whose transfers cap
each file (16 MiB on the lent GPU hosts).

AdamW keeps two moments per trained parameter: for SmolLM2-135M with rank-8 LoRA adapters on q/k/v/o for
three roles that is 2.8 M parameters, 11 MB of adapters and 22 MB of moments. `save_optimizer` writes
`optimizer.pt` (the param groups and the shard count) and the per-parameter state in `optimizer-<k>.pt`
shards of at most `max_file_bytes` each (one parameter's state is never split; a single one larger than the
limit gets a shard of its own). `load_optimizer` reads both layouts, and a plain `optimizer.pt` of older
checkpoints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MiB = 1 << 20
DEFAULT_MAX_FILE_BYTES = 12 * MiB  # tensor data per shard; a file adds its zip and pickle framing


def _state_bytes(state: dict[str, Any]) -> int:
    return sum(v.numel() * v.element_size() for v in state.values() if hasattr(v, "element_size"))


def save_optimizer(state_dict: dict[str, Any], folder: str | Path,
                   max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> list[Path]:
    """Write the state dict into `folder`; returns the files written."""
    import torch

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    shards: list[dict[int, Any]] = [{}]
    size = 0
    for index, state in state_dict["state"].items():
        bytes_ = _state_bytes(state)
        if shards[-1] and size + bytes_ > max_file_bytes:
            shards.append({})
            size = 0
        shards[-1][index] = state
        size += bytes_
    written = [folder / "optimizer.pt"]
    torch.save({"param_groups": state_dict["param_groups"], "shards": len(shards)}, written[0])
    for k, shard in enumerate(shards):
        written.append(folder / f"optimizer-{k:03d}.pt")
        torch.save(shard, written[-1])
    return written


def load_optimizer(folder: str | Path) -> dict[str, Any]:
    """The state dict `save_optimizer` wrote (or a plain torch.save of one)."""
    import torch

    folder = Path(folder)
    # On the CPU: a GPU run's checkpoint resumes on a machine without one (Optimizer.load_state_dict moves
    # each state to its parameter's device).
    head = torch.load(folder / "optimizer.pt", weights_only=True, map_location="cpu")
    if "shards" not in head:
        return head
    state: dict[int, Any] = {}
    for k in range(head["shards"]):
        state.update(torch.load(folder / f"optimizer-{k:03d}.pt", weights_only=True, map_location="cpu"))
    return {"state": state, "param_groups": head["param_groups"]}


def largest_files(folder: str | Path, n: int = 5) -> list[tuple[str, int]]:
    """The n largest files under `folder` (relative path, bytes), largest first."""
    folder = Path(folder)
    sizes = [(str(p.relative_to(folder)), p.stat().st_size) for p in folder.rglob("*") if p.is_file()]
    return sorted(sizes, key=lambda item: -item[1])[:n]


__all__ = ["DEFAULT_MAX_FILE_BYTES", "largest_files", "load_optimizer", "save_optimizer"]
