#!/usr/bin/env bash
# The GPU judge's integrity in one command on the GPU host (H100/H200, torch 2.11, triton 3.6, offline),
# within 6 minutes of wall time. From the checkout's root:
#   bash benchmarks/gpu/gpu_integrity.sh [PART ...]      parts: env cheats integrity noise (default: all four)
# Parts (each under its own time limit, so that one hang does not eat the others):
#   cheats     pytest -m gpu -rA on the new GPU cheats of tests/adversarial (issue 43g), once as the judge
#              decides by default and once with the launches seen from outside deciding too
#              (KERNELGYM_CORPUS_LAUNCH_RULES=1): $OUT/cheats_default.log, $OUT/cheats_launch_rules.log
#   integrity  python benchmarks/judge_trust/integrity.py over the triton and cuda backends: every Triton and CUDA cheat
#              of tests/adversarial, the bundled examples and the backward suite of both backends (tests/legit
#              holds no GPU solution): $OUT/integrity.md, $OUT/integrity.json, $OUT/integrity.log
#   noise      python benchmarks/judge_trust/timing_stability.py --backend triton: the speedup's CV over 10 evaluations
#              of 5 bundled tasks (two small kernels: their cpu shapes; three large), alone on the GPU:
#              $OUT/timing_stability.md, $OUT/timing_stability.jsonl (one line per task as it finishes)
# cheats and integrity run side by side (the GPU's timing slot is one lock for the machine), then noise alone.
# Knobs: CHEATS_S, INTEGRITY_S, NOISE_S (limits, seconds), WORKERS (integrity's pool), INTEGRITY_BACKENDS,
# INTEGRITY_ARGS (e.g. --launch-rules), NOISE_REPEATS, NOISE_TASKS, NOISE_BACKEND, CHEATS_K (a -k filter),
# INSTALL=1 (pip install -e . first), PYTHON. Worst case: 5 + max(200, 2 x 95) + 120 s and the kill graces.
# Logs and results go to $OUT (the device tool brings that folder back).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/kernelgym-gpu-integrity}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
PYTHON=${PYTHON:-python3}
parts=${*:-env cheats integrity noise}
has() { [[ " $parts " == *" $1 "* ]]; }
started=$(date +%s)
stamp() { echo "== $1 at +$(( $(date +%s) - started )) s" | tee -a "$OUT/steps.log"; }
# the GPU cheats written for issue 43g: the judge's own-code evidence on a GPU
NEW_CHEATS="triton_forge_gpu_profile_summary or cuda_forge_torch_profiler_names or triton_cublas_via_ctypes_named_decoy \
or triton_cublas_in_thread_born_per_call or triton_graph_replay_hides_cublas or triton_gemm_in_helper_process \
or cuda_uprobe_breakpoint_aware_passthrough or cuda_launches_laundered_through_got"

if has env; then
  stamp env
  # INSTALL=1: this checkout installed first (offline, as ../shared/gpu-host/README.md says)
  [[ ${INSTALL:-0} == 1 ]] && $PYTHON -m pip install -q --no-deps --no-build-isolation --no-index -e . >> "$OUT/steps.log" 2>&1
  { date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    $PYTHON -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())'
    nvcc --version | tail -1; git rev-parse HEAD 2>/dev/null
    cat /proc/sys/kernel/perf_event_paranoid; ls /sys/kernel/tracing/uprobe_events 2>&1; } >> "$OUT/steps.log" 2>&1
fi

pids=()
if has cheats; then
  stamp cheats
  (
    # By default, then with the launch evidence deciding: the same cheats, one pool each, one limit each.
    filter="test_cheat_earns_nothing and (${CHEATS_K:-$NEW_CHEATS})"
    for mode in default launch_rules; do
      rules=0; [[ $mode == launch_rules ]] && rules=1
      KERNELGYM_CORPUS_LAUNCH_RULES=$rules timeout -k 10 ${CHEATS_S:-95} $PYTHON -m pytest -m gpu -v -rA \
        -p no:cacheprovider tests/adversarial/test_corpus.py -k "$filter" > "$OUT/cheats_$mode.log" 2>&1
      echo "cheats $mode rc=$? (1: a cheat earned something; 124: its limit)" >> "$OUT/steps.log"
    done
  ) &
  pids+=($!)
fi
if has integrity; then
  stamp integrity
  (
    backends=""
    for b in ${INTEGRITY_BACKENDS:-triton cuda}; do backends="$backends --backend $b"; done
    timeout -k 10 ${INTEGRITY_S:-200} $PYTHON benchmarks/judge_trust/integrity.py $backends --workers ${WORKERS:-6} \
      --out "$OUT/integrity.md" --json "$OUT/integrity.json" ${INTEGRITY_ARGS:-} > "$OUT/integrity.log" 2>&1
    echo "integrity rc=$? (1: a credited cheat or a false rejection; 124: its limit)" >> "$OUT/steps.log"
  ) &
  pids+=($!)
fi
for pid in ${pids[@]+"${pids[@]}"}; do wait "$pid"; done
if has cheats; then
  for log in cheats_default cheats_launch_rules; do
    [[ -f "$OUT/$log.log" ]] && { echo "-- $log"; grep -E "^(PASSED|FAILED|ERROR) |passed|failed|no tests ran" "$OUT/$log.log" | tail -12; } | tee -a "$OUT/steps.log"
  done
fi
has integrity && grep -E "^\| (triton|cuda) \|" "$OUT/integrity.log" | tee -a "$OUT/steps.log"

if has noise; then  # alone on the GPU: nothing else is judged meanwhile
  stamp noise
  rm -f "$OUT/timing_stability.jsonl"
  timeout -k 10 ${NOISE_S:-120} $PYTHON benchmarks/judge_trust/timing_stability.py --backend ${NOISE_BACKEND:-triton} \
    --repeats ${NOISE_REPEATS:-10} ${NOISE_TASKS:+--tasks "$NOISE_TASKS"} --label "gpu_integrity.sh" \
    --out "$OUT/timing_stability.md" --json "$OUT/timing_stability.jsonl" > "$OUT/noise.log" 2>&1
  echo "noise rc=$? (124: its limit; the tasks done are in timing_stability.jsonl)" | tee -a "$OUT/steps.log"
  grep -E "^\| L" "$OUT/noise.log" | tee -a "$OUT/steps.log"
fi
stamp done
