#!/usr/bin/env bash
# The GPU judge's integrity in one command on the GPU host (H100/H200, torch 2.11, triton 3.6, offline),
# within 9 minutes of wall time (the device tool's limit is 10). From the checkout's root:
#   bash benchmarks/gpu/gpu_integrity.sh [PART ...]   parts: env cheats integrity evidence noise (default: all);
#                                                     load (not in the default: ask for it)
# Parts (each under its own time limit, so that one hang does not eat the others):
#   cheats     pytest -m gpu -rA on the new GPU cheats of tests/adversarial (issue 43g) through the corpus's test
#              (tests/adversarial/test_corpus.py), judged with the launches watched from outside the candidate
#              deciding (EvalOptions.launch_evidence, the default): $OUT/cheats_default.log
#   integrity  python benchmarks/judge_trust/integrity.py over the triton and cuda backends: every Triton and CUDA cheat
#              of tests/adversarial, the bundled examples and the backward suite of both backends (tests/legit
#              holds no GPU solution): $OUT/integrity.md, $OUT/integrity.json, $OUT/integrity.log
#   evidence   the same with --no-launch-evidence, after the two above: what the in-process profile alone
#              would credit (the judge before the launch evidence became the default, 2026-12-07;
#              docs/gpu-own-code-wiring.md): $OUT/integrity_profile_only.{md,json,log}
#   noise      python benchmarks/judge_trust/timing_stability.py --backend triton: the speedup's CV over 10 evaluations
#              of 5 bundled tasks (two small kernels: their cpu shapes; three large), alone on the GPU:
#              $OUT/timing_stability.md, $OUT/timing_stability.jsonl (one line per task as it finishes)
#   load       python benchmarks/judge_trust/honest_under_load.py: the GPU learning run's charged replies and the
#              bundled cpp solutions, judged by one worker a core but one beside 2 busy loops for LOAD_SECONDS
#              (70): every verdict not ok with its reasons, $OUT/load.log, $OUT/load.jsonl
# cheats and integrity run side by side (the GPU's timing slot is one lock for the machine), then evidence,
# then noise, each alone.
# Knobs: CHEATS_S, INTEGRITY_S, EVIDENCE_S, NOISE_S (limits, seconds), WORKERS (integrity's pool),
# INTEGRITY_BACKENDS, INTEGRITY_ARGS, NOISE_REPEATS, NOISE_TASKS, NOISE_BACKEND, NOISE_OPTIONS (timing_stability.py's
# --option NAME=VALUE, e.g. "--option timing_precision=0.01"), CHEATS_K (a -k filter),
# INSTALL=1 (pip install -e . first), PYTHON. Worst case: 5 + max(200, 95) + 200 + 120 s and the kill
# graces.
# Logs and results go to $OUT (the device tool brings that folder back).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/kernelgym-gpu-integrity}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
PYTHON=${PYTHON:-python3}
parts=${*:-env cheats integrity evidence noise}
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
  # gymnasium is not on the host: its wheels travel in .whl (carry it; ../shared/gpu-host/wheels.sh makes them)
  [[ ${INSTALL:-0} == 1 && -d .whl ]] && $PYTHON -m pip install -q --no-index --find-links .whl gymnasium \
    farama-notifications >> "$OUT/steps.log" 2>&1
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
    filter="${CHEATS_K:-$NEW_CHEATS}"
    timeout -k 10 ${CHEATS_S:-95} $PYTHON -m pytest -m gpu -v -rA -p no:cacheprovider \
      tests/adversarial/test_corpus.py -k "test_cheat_earns_nothing and ($filter)" > "$OUT/cheats_default.log" 2>&1
    echo "cheats default rc=$? (1: a cheat earned something; 124: its limit)" >> "$OUT/steps.log"
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
if has evidence; then  # after the two above: the GPU's timing slot is one lock for the machine
  stamp evidence
  backends=""
  for b in ${INTEGRITY_BACKENDS:-triton cuda}; do backends="$backends --backend $b"; done
  timeout -k 10 ${EVIDENCE_S:-200} $PYTHON benchmarks/judge_trust/integrity.py $backends --workers ${WORKERS:-6} \
    --no-launch-evidence --out "$OUT/integrity_profile_only.md" --json "$OUT/integrity_profile_only.json" \
    > "$OUT/integrity_profile_only.log" 2>&1
  echo "evidence rc=$? (1: a credited cheat or a false rejection; 124: its limit)" >> "$OUT/steps.log"
  grep -E "^\| (triton|cuda) \|" "$OUT/integrity_profile_only.log" | tee -a "$OUT/steps.log"
fi
if has cheats; then
  for log in cheats_default; do
    [[ -f "$OUT/$log.log" ]] && { echo "-- $log"; grep -E "^(PASSED|FAILED|ERROR) |passed|failed|no tests ran" "$OUT/$log.log" | tail -12; } | tee -a "$OUT/steps.log"
  done
fi
has integrity && grep -E "^\| (triton|cuda) \|" "$OUT/integrity.log" | tee -a "$OUT/steps.log"
has integrity && grep -c "own_code_unverified" "$OUT/integrity.log" | sed 's/^/rows with own_code_unverified: /' \
  | tee -a "$OUT/steps.log"

if has noise; then  # alone on the GPU: nothing else is judged meanwhile
  stamp noise
  rm -f "$OUT/timing_stability.jsonl"
  timeout -k 10 ${NOISE_S:-120} $PYTHON benchmarks/judge_trust/timing_stability.py --backend ${NOISE_BACKEND:-triton} \
    --repeats ${NOISE_REPEATS:-10} ${NOISE_TASKS:+--tasks "$NOISE_TASKS"} --label "gpu_integrity.sh" ${NOISE_OPTIONS:-} \
    --out "$OUT/timing_stability.md" --json "$OUT/timing_stability.jsonl" > "$OUT/noise.log" 2>&1
  echo "noise rc=$? (124: its limit; the tasks done are in timing_stability.jsonl)" | tee -a "$OUT/steps.log"
  grep -E "^\| L" "$OUT/noise.log" | tee -a "$OUT/steps.log"
fi
if has load; then  # CPU work only: before or after the GPU parts, never beside them
  stamp load
  timeout -k 10 $(( ${LOAD_SECONDS:-70} + 90 )) $PYTHON benchmarks/judge_trust/honest_under_load.py \
    --replies benchmarks/judge_trust/data/segment4_charged_replies.jsonl --examples cpp \
    --workers $(( $(nproc) - 1 )) --busy 2 --seconds ${LOAD_SECONDS:-70} --json "$OUT/load.jsonl" > "$OUT/load.log" 2>&1
  echo "load rc=$? (124: its limit; the verdicts not ok are in load.jsonl)" | tee -a "$OUT/steps.log"
  tail -4 "$OUT/load.log" | tee -a "$OUT/steps.log"
fi
stamp done
