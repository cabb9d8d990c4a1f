#!/usr/bin/env bash
# Everything kernelgym runs on the H200 host, in one call: the gpu tests, the GPU benchmarks and a replay bench.
#   bash benchmarks/gpu/gpu_run.sh [STEP ...]     steps: env tests results bench (default: all), pending,
#   judge and curve (issue 27's latency and throughput, KERNELBENCH_ROOT set), final (issue 27's figures in one
#   run: torch's own build of each file, the judge, the curve; FINAL_S, CURVE_WORKERS, CURVE_COUNT)
# `pending` is what the CPU sessions changed and could not confirm on a GPU (about 10 minutes): the task
# options' GPU test, the input handover's cheats, a worker's start and `kernelgym eval`'s whole command (with
# and without the worker's warm-ups), the launches seen from outside (launch_probe_gpu.py), the reference's
# start-up parts
# with and without the cached task cost, and (with KERNELBENCH_ROOT) the judge phase of cold_build_gpu.py.
# Knobs: TESTS_K (a pytest -k filter), TESTS_S / RESULTS_S / BENCH_S (step time limits), REPEATS, PHASES (of
# gpu_results.py), BENCH_BACKENDS.
# One device call runs at most 10 minutes: run `env tests` in one call and `env results bench` in the next.
# Logs and results go to $OUT (the device tool brings that folder back), at most 8 files.
set -uo pipefail
OUT=${OUT:-/tmp/kernelgym-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
steps=${*:-env tests results bench}
has() { [[ " $steps " == *" $1 "* ]]; }
started=$(date +%s)
stamp() { echo "== $1 at +$(( $(date +%s) - started )) s" | tee -a "$OUT/steps.log"; }

if has env; then
  stamp env
  { date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
    python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())'
    nvcc --version | tail -2; ncu --version | tail -1; git rev-parse HEAD 2>/dev/null; } >> "$OUT/steps.log" 2>&1
fi
if has tests; then
  stamp tests
  timeout ${TESTS_S:-420} python3 -m pytest -m gpu tests -q -rA -s -p no:cacheprovider ${TESTS_K:+-k "$TESTS_K"} 2>&1 | tail -c 400000 > "$OUT/pytest.log"
  tail -5 "$OUT/pytest.log" | tee -a "$OUT/steps.log"
fi
if has results; then
  stamp results
  timeout ${RESULTS_S:-420} python3 benchmarks/judge_speed/gpu_results.py --repeats ${REPEATS:-3} ${PHASES:+--phases "$PHASES"} --out "$OUT/RESULTS.md" > "$OUT/results.log" 2>&1
  echo "results rc=$?" | tee -a "$OUT/steps.log"
fi
if has bench; then
  stamp bench
  for backend in ${BENCH_BACKENDS:-triton cuda}; do
    timeout ${BENCH_S:-70} python3 -m kernelgym.cli bench --env KernelGym-v0 --policy "replay:$backend+cheats" --backend "$backend" \
      --size gpu --concurrency 2 --out "/tmp/bench_$backend" >> "$OUT/bench.log" 2>&1
    echo "bench $backend rc=$?" | tee -a "$OUT/steps.log"
  done
  tar -czf "$OUT/bench.tgz" -C /tmp $(for b in ${BENCH_BACKENDS:-triton cuda}; do echo "bench_$b"; done) 2>/dev/null
fi
if has judge; then  # issue 27: KernelBench-format CUDA and Triton candidates one at a time, spares on and off
  stamp judge
  timeout ${JUDGE_S:-220} python3 benchmarks/judge_speed/cold_build_gpu.py --kernelbench "$KERNELBENCH_ROOT" \
    --own benchmarks/kb_format_cuda --triton 4 --workers 8 --phases judge --timeout-s 90 --compare-spares --cache /tmp/kg-cache \
    > "$OUT/judge.log" 2>&1
  echo "judge rc=$?" | tee -a "$OUT/steps.log"; grep -E "^judge|^syntax" "$OUT/judge.log" | tee -a "$OUT/steps.log"
fi
if has curve; then  # issue 27: new candidates a minute over worker counts, the timing slot's busy share
  stamp curve
  mkdir -p "$OUT/curve"
  OUT="$OUT/curve" timeout ${CURVE_S:-150} python3 benchmarks/judge_speed/cold_build_gpu.py --kernelbench "$KERNELBENCH_ROOT" \
    --own benchmarks/kb_format_cuda --cache /tmp/kg-cache --phases curve --curve-workers ${CURVE_WORKERS:-8,16} \
    --curve-count ${CURVE_COUNT:-24} --timeout-s 90 > "$OUT/curve.log" 2>&1
  echo "curve rc=$?" | tee -a "$OUT/steps.log"; grep -E "^curve" "$OUT/curve.log" | tee -a "$OUT/steps.log"
fi
if has final; then  # issue 27 in one run: torch's own build of every file, then the judge, then the curve
  stamp final
  mkdir -p "$OUT/final"
  OUT="$OUT/final" timeout ${FINAL_S:-540} python3 benchmarks/judge_speed/cold_build_gpu.py --kernelbench "$KERNELBENCH_ROOT" \
    --own benchmarks/kb_format_cuda --triton 4 --parallel 13 --workers 8 --timeout-s 150 --cache /tmp/kg-cache \
    --phases torch,judge,curve --curve-workers ${CURVE_WORKERS:-8,16} --curve-count ${CURVE_COUNT:-32} \
    > "$OUT/final.log" 2>&1
  echo "final rc=$?" | tee -a "$OUT/steps.log"; grep -E "^judge|^syntax|^curve|^\| (kb|own)" "$OUT/final.log" | tee -a "$OUT/steps.log"
fi
if has pending; then
  stamp pending
  now() { python3 -c 'import time; print(f"{time.time():.3f}")'; }
  timeout 150 python3 -m pytest -m gpu -v -s -p no:cacheprovider tests/gpu/test_task_options_gpu.py > "$OUT/options.log" 2>&1
  echo "options rc=$?" | tee -a "$OUT/steps.log"; grep -E " FAILED|passed|failed" "$OUT/options.log" | tail -5 | tee -a "$OUT/steps.log"
  timeout 30 python3 benchmarks/judge_speed/worker_start.py >> "$OUT/pending.log" 2>&1
  timeout 30 python3 benchmarks/judge_speed/worker_start.py --whole >> "$OUT/pending.log" 2>&1
  relu=kernelgym/solutions/triton/level1/1_ReLU.py
  # the GPU input handover (empty buffers mapped, filled while the candidate is frozen) and its two cheats
  timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests/adversarial/test_corpus.py tests/gpu/test_gpu_smoke.py \
    -k "precompute_while_mapping or lazy_outputs_on_read or relu_into_shared_input or examples_ok" > "$OUT/handover.log" 2>&1
  echo "handover rc=$?" | tee -a "$OUT/steps.log"; tail -3 "$OUT/handover.log" | tee -a "$OUT/steps.log"
  for backend in triton cuda; do  # kernelgym eval FILE's whole command, with and without the worker's warm-ups
    timeout 100 python3 benchmarks/judge_speed/eval_startup.py --repeats 2 --backend $backend --task bundled/L1/1_ReLU 2>&1 | tail -4 | tee -a "$OUT/steps.log"
  done
  for costs in --forget-costs ""; do
    timeout 60 python3 benchmarks/judge_speed/timing_parts.py L1/1_ReLU "$relu" 4 --backend triton --parts reference $costs 2>&1 | tail -1 | tee -a "$OUT/steps.log"
  done
  timeout 60 python3 benchmarks/judge_speed/timing_parts.py L1/10_Softmax kernelgym/solutions/triton/level1/10_Softmax.py 6 --backend triton 2>&1 | tail -1 | tee -a "$OUT/steps.log"
  # launches seen from outside the candidate, by kind of launch, then examples and cheats with the rules on
  timeout 170 python3 benchmarks/judge_trust/launch_probe_gpu.py --judge 4 --out "$OUT/launch_probe.md" > "$OUT/launch_probe.log" 2>&1
  echo "launch_probe rc=$?" | tee -a "$OUT/steps.log"
  if [[ -n "${KERNELBENCH_ROOT:-}" ]]; then
    timeout 100 python3 benchmarks/judge_speed/cold_build_gpu.py --kernelbench "$KERNELBENCH_ROOT" --own benchmarks/kb_format_cuda \
      --only kb_add,kb_tiled_matmul,kb_fuse_gelu --triton 4 --workers 8 --phases judge --timeout-s 90 > "$OUT/judge.log" 2>&1
    echo "judge rc=$?" | tee -a "$OUT/steps.log"
  fi
fi
stamp done
