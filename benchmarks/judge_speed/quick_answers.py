"""What an RL step pays beyond the evaluation itself: a reply the static stage rejects, and `kernelgym eval`.

1. Seconds from a fresh EvalPool to the verdict of its first evaluation, for replies the static stage rejects
   (a syntax error, no ModelNew, no kernel, a C++ file sent as the solution): answered in the caller's
   process, no worker started.
2. `kernelgym eval --task L1/1_ReLU FILE` on a solution already built: the command's wall time beside the
   evaluation's own `wall_s`.

    python benchmarks/judge_speed/quick_answers.py [--repeats 5] \
        [--out benchmarks/results/judge_speed/quick_answers.md]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[1]))  # the repository root

REJECTED = {
    "syntax error": "class ModelNew(:\n    pass\n",
    "no ModelNew": "import torch\n\nclass Model(torch.nn.Module):\n    pass\n",
    "no kernel": ("import torch\n\nclass ModelNew(torch.nn.Module):\n"
                  "    def forward(self, x):\n        return torch.relu(x)\n"),
    "a C++ file": "#include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x) { return x; }\n",
}


def first_answer_s(source: str) -> tuple[float, str]:
    from kernelgym.tasks import bundled
    from kernelgym.workers.pool import EvalPool

    task = bundled().get("L1/1_ReLU")
    started = time.perf_counter()
    with EvalPool(workers=1, gpu=False) as pool:
        result = pool.evaluate(task, source, backend="cpp")
        seconds = time.perf_counter() - started
    return seconds, str(result.reasons[0]).split(":")[0]


def cli_overhead(repeats: int) -> list[dict]:
    from kernelgym.solutions import examples

    source = next(e.source for e in examples("cpp") if e.task_id.endswith("L1/1_ReLU") and not e.cheat)
    folder = Path(tempfile.mkdtemp(prefix="kg-quick-"))
    path = folder / "relu.py"
    path.write_text(source)
    command = [sys.executable, "-m", "kernelgym.cli", "eval", "--task", "L1/1_ReLU", "--backend", "cpp",
               "--json", str(path)]
    rows = []
    for i in range(repeats + 1):  # the first run builds the solution into the cache
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith("{")), "{}")
        evaluation = json.loads(line).get("wall_s")
        if i and evaluation is not None:
            rows.append({"command_s": round(wall, 2), "evaluation_s": evaluation,
                         "beyond_s": round(wall - evaluation, 2)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=str(HERE.parent / "results" / "judge_speed" / "quick_answers.md"))
    args = parser.parse_args()
    import torch

    lines = ["# Quick answers: rejected replies and `kernelgym eval`", "",
             (f"Machine: {platform.node() or 'this machine'}, {os.cpu_count()} cores, Python "
             f"{platform.python_version()}, torch {torch.__version__}; "
             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; load average "
             f"{os.getloadavg()[0]:.1f} at the start."), "",
             f"    python benchmarks/judge_speed/quick_answers.py --repeats {args.repeats}", "",
             "## A rejected reply: seconds from a fresh EvalPool to its verdict (no worker started)", "",
             "| reply | verdict reason | median s | runs |", "|---|---|---|---|"]
    for name, source in REJECTED.items():
        runs = [first_answer_s(source) for _ in range(args.repeats)]
        times = sorted(s for s, _ in runs)
        lines.append(f"| {name} | {runs[0][1]} | {times[len(times) // 2] * 1e3:.1f} ms | "
                     f"{', '.join(f'{s * 1e3:.1f}' for s, _ in runs)} |")
    rows = cli_overhead(args.repeats)
    lines += ["", "## `kernelgym eval --task L1/1_ReLU FILE` (cpp, the solution already built)", "",
              "| command s | evaluation s | beyond the evaluation s |", "|---|---|---|"]
    lines += [f"| {r['command_s']} | {r['evaluation_s']} | {r['beyond_s']} |" for r in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
