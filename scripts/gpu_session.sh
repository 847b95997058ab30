#!/usr/bin/env bash
# The GPU session's runbook (docs/benchmarks.md "Still to be measured on a GPU"): what one lent
# GPU can take, in parts that each fit one device-tool call (10 minutes at most), ordered by value.
#
#   bash scripts/gpu_session.sh a   GPU tests, kernel bench, hardware counters of the attention
#                                   kernels (hetplan_kernel_metrics), attention against PyTorch's
#                                   SDPA, attention per path and the opt-in attention variants,
#                                   then `hetplan calibrate --quick` if time is left
#   bash scripts/gpu_session.sh b   the full `hetplan calibrate` (resumable: run `b` again until
#                                   its summary says complete), then `hetplan fit` of it
#   bash scripts/gpu_session.sh c   predicted against measured (scripts/measure_sweep.sh), the
#                                   Python GPU tests, harness_vs_model on the GPU, the LLaMA rows
#                                   with the eager operators, the parallel harness tests (CPU)
#
# Needs gpu-bundle/ (scripts/gpu_bundle.sh, made here) carried to the GPU machine; the scripts
# run from the repository copy the tool sends. Each part writes $OUT/<part>/summary.txt (what was
# done and what is left) and $OUT/<part>/results.tgz (logs and result files; split into
# results.tgz.partN when over 15 MiB), both rewritten after every step, so a call cut short still
# brings back what it finished. Every step runs under a time limit that ends it before the call's
# (HETPLAN_CALL_SECONDS); a step that no longer fits is listed as left.
#
# Results of earlier calls: copy each call's files (files_at) into gpu-results/ here and carry
# gpu-results too. Part b continues the calibration journal found in gpu-results/b/ (on a fresh
# machine), part c takes its calibration from b (else a's quick one) there. On a machine kept
# warm, out/gpu-session/ (ignored by git) still holds the earlier parts' work and is used first.
#
# Environment:
#   HETPLAN_CALL_SECONDS    seconds this call may take in all (default 570: the tool's 600 less
#                           a margin for its start and transfers)
#   OUT                     where results go (the device tool sets it; default out/gpu-session/OUT)
#   HETPLAN_CALIBRATE_ARGS  extra arguments for the full calibration (part b)
#   HETPLAN_FRESH=1         part b: start the calibration afresh (earlier journal set aside)
#   HETPLAN_SESSION_WITHOUT_GPU=1   go on without a visible GPU (rehearsal: every GPU step then
#                           fails or skips, and the summaries, limits and staging can be checked)
#   HETPLAN_SESSION_FAKE_STEP_S=N   rehearsal: every step is `sleep N` instead of its command
#   HETPLAN_SESSION_GPU=NAME        rehearsal: the GPU name (as nvidia-smi says it) that picks
#                           the GPU type and the sweep's cluster (H100 or H200)
# Exit status: 0 when the part ran to its end (each step's exit status is in the summary, and the
# steps that did not fit are listed), 1 when the bundle or the GPU is missing, 2 for a bad argument.
# The parts and the helpers they use are called through "part_$part": not unreachable.
# shellcheck disable=SC2317
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
root=$PWD
part=${1:-}
case "$part" in
  a | b | c) ;;
  *) echo "usage: $0 a|b|c   (docs/benchmarks.md \"Still to be measured on a GPU\")" >&2; exit 2 ;;
esac

start_s=$(date +%s)
deadline=$((start_s + ${HETPLAN_CALL_SECONDS:-570}))
pack_reserve_s=15  # packing the results at the end
min_step_s=20      # a step is not started with less than this left
session=$root/out/gpu-session
work=$session/$part
outdir=${OUT:-$session/OUT}/$part
results=$root/gpu-results
# Parts a and c start clean; b keeps its journal (a second call continues it) unless told not to
# (then the earlier one is set aside, not lost).
if [ "$part" != b ]; then
  rm -rf "$work"
elif [ "${HETPLAN_FRESH:-0}" = 1 ] && [ -d "$work" ]; then
  mv "$work" "$session/b.old.$start_s"
fi
mkdir -p "$work/logs" "$outdir"
summary=$work/summary.txt
: > "$summary"
left_steps=()

say() { echo "$*" | tee -a "$summary"; }
elapsed() { echo $(($(date +%s) - start_s)); }

# Writes the summary and the packed work folder to $OUT/<part>/ (at most 8 files come back, 16 MiB
# each: results.tgz is split above 15 MiB).
pack() {
  cp "$summary" "$outdir/summary.txt"
  rm -f "$outdir"/results.tgz*
  tar -C "$work" --exclude=./input -czf "$session/$part-results.tgz" . 2>/dev/null
  if [ "$(stat -c %s "$session/$part-results.tgz")" -gt $((15 * 1048576)) ]; then
    split -b 15M -d -a 1 "$session/$part-results.tgz" "$outdir/results.tgz.part"
    rm -f "$session/$part-results.tgz"
  else
    mv "$session/$part-results.tgz" "$outdir/results.tgz"
  fi
}

# step NAME CAP_S GRACE_S COMMAND...: runs COMMAND (output in logs/NAME.log) for at most CAP_S
# seconds, fewer when the call's deadline is nearer. At the limit it gets SIGINT (hetplan
# calibrate then finishes the measurement in flight and writes its file; Python stops with
# KeyboardInterrupt) and GRACE_S seconds later SIGKILL. Returns COMMAND's exit status, 124 when
# stopped at the limit, 99 when not started.
step() {
  local name=$1 cap=$2 grace=$3
  shift 3
  local now left limit t0 rc
  now=$(date +%s)
  left=$((deadline - now - pack_reserve_s - grace))
  if [ "$left" -lt "$min_step_s" ]; then
    say "[left]    $name: not started, $((deadline - now)) s left in this call (it takes up to $cap s)"
    left_steps+=("$name")
    return 99
  fi
  limit=$((cap < left ? cap : left))
  echo "== $name (limit $limit s, at $(elapsed) s)"
  [ -n "${HETPLAN_SESSION_FAKE_STEP_S:-}" ] && set -- sleep "$HETPLAN_SESSION_FAKE_STEP_S"
  t0=$(date +%s)
  timeout --signal=INT --kill-after="$grace" "$limit" "$@" > "$work/logs/$name.log" 2>&1 < /dev/null
  rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    say "[stopped] $name: at its limit of $limit s; what it finished is in logs/$name.log"
    left_steps+=("$name (stopped at its limit)")
    rc=124
  else
    say "[done]    $name: exit $rc in $(($(date +%s) - t0)) s"
    # Why it failed, as far as its last lines say.
    [ "$rc" -ne 0 ] && tail -n 3 "$work/logs/$name.log" | cut -c1-300 | sed 's/^/    | /' |
      tee -a "$summary"
  fi
  pack
  return "$rc"
}

# What a step printed that matters, into the summary (and the call's output).
excerpt() {  # excerpt FILE [grep -E pattern] [max lines]
  local file=$1 pattern=${2:-.} max=${3:-40}
  [ -f "$file" ] || return 0
  grep -aE "$pattern" "$file" | awk -v max="$max" 'NR <= max' | sed 's/^/    /' | tee -a "$summary"
}

# The plan, the sections, problems, the last progress line and the file written.
calibrate_excerpt() {
  excerpt "$1" ' measurements|^calibrate: (section|warning|the GPU|clocks|.* failed:)|^wrote' 24
  grep -a "^calibrate: \[" "$1" | tail -1 | sed 's/^/    /' | tee -a "$summary"
}

# The GEMM held-out scores against their targets, attention, the layer corrections (item 3), and
# the SM clock each class of measurement saw (item 15: attention alone against inside the layers).
fit_excerpt() {
  excerpt "$1" 'GEMM|dtype|^  (fp8|fp16|bf16|tf32|fp32) |^  attention |whole layers|with the corrections|^    correction|not used|targets|^  SM clock|^    (gemm|kernel attention|kernel bandwidth|layer) ' 60
}

finish() {
  local next
  say ""
  if [ ${#left_steps[@]} -eq 0 ]; then
    say "part $part: every step ran, in $(elapsed) s"
  else
    say "part $part: left for a later call: ${left_steps[*]} (after $(elapsed) s)"
  fi
  case "$part" in
    a) next="b (the full calibration)" ;;
    b) next=$([ -f "$work/complete" ] && echo "c (the sweep and the Python GPU tests)" ||
                echo "b again (the calibration continues from its journal)") ;;
    c) next="nothing: copy the numbers into docs/benchmarks.md" ;;
  esac
  say "next: $next"
  pack
  echo "results: $outdir (summary.txt, results.tgz)"
}

# --- the bundle: unpacked into out/gpu-session/bundle/ unless that is already this one ---------
bundle=$session/bundle
archive=$root/gpu-bundle/hetplan-gpu.tar.xz
if [ ! -f "$archive" ]; then
  say "gpu_session: $archive missing: make it here (scripts/gpu_bundle.sh) and carry gpu-bundle"
  pack
  exit 1
fi
if ! cmp -s "$root/gpu-bundle/MANIFEST.txt" "$bundle/MANIFEST.txt"; then
  rm -rf "$bundle"
  mkdir -p "$bundle"
  # Python's lzma: a bare machine may lack the xz program.
  python3 - "$archive" "$bundle" <<'PY' || { say "gpu_session: cannot unpack $archive"; pack; exit 1; }
import sys, tarfile
with tarfile.open(sys.argv[1], "r:xz") as t:
    if hasattr(tarfile, "tar_filter"):
        t.extractall(sys.argv[2], filter="tar")
    else:
        t.extractall(sys.argv[2])
PY
fi
bin=$bundle/bin
# The bundle's libraries go on the path only where this machine lacks them: Python and PyTorch
# (started by the steps, also under hetplan measure) keep the system's zlib, BLAS, ...
rm -rf "$bundle/ldpath"
mkdir -p "$bundle/ldpath"
have=$(ldconfig -p 2>/dev/null | awk '{print $1}')
for lib in "$bundle"/lib/*; do
  [ -f "$lib" ] || continue
  grep -qxF "$(basename "$lib")" <<< "$have" || ln -s "$lib" "$bundle/ldpath/"
done
# CUDA's libraries: pip's nvidia-* wheels first (those PyTorch loads), then the toolkit's.
cuda_dirs=$(python3 - 2>/dev/null <<'PY'
import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
for r in roots:
    for d in sorted(glob.glob(os.path.join(r, "nvidia", "*", "lib"))):
        print(d)
PY
)
path=$bundle/ldpath
for d in $cuda_dirs /usr/local/cuda/lib64 /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/lib; do
  [ -d "$d" ] && path="$path:$d"
done
export LD_LIBRARY_PATH="$path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# hetplan and the harness, run from this copy of the repository (not the build's source path).
export HETPLAN_BINARY=$bin/hetplan HETPLAN=$bin/hetplan HETPLAN_PYTHON=${HETPLAN_PYTHON:-python3}
export HETPLAN_SCRIPTS_DIR=$root/scripts HETPLAN_CALIBRATION_DIR=$root/calibration_data
export HETPLAN_KERNELS_LIB=$bin/libhetplan_kernels_c.so PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
# hetplan_kernel_metrics: CUPTI loads libnvperf_host.so and libnvperf_target.so (dlopen) and
# needs the ones of its own version. Where the libcupti.so.13 this path resolves has none beside
# it, the bundle's matching set (cupti/: libcupti, libnvperf_*) goes first, for that tool alone.
export HETPLAN_KERNEL_METRICS=$bin/hetplan_kernel_metrics HETPLAN_KERNEL_METRICS_LIBS=""
metrics_env=(env)
if [ -x "$HETPLAN_KERNEL_METRICS" ]; then
  cupti_lib=$(ldd "$HETPLAN_KERNEL_METRICS" 2>/dev/null | awk '/libcupti\.so/ {print $3}')
  if [ -z "$cupti_lib" ] || [ ! -f "$(dirname "$cupti_lib")/libnvperf_host.so" ]; then
    HETPLAN_KERNEL_METRICS_LIBS=$bundle/cupti
    metrics_env+=("LD_LIBRARY_PATH=$bundle/cupti:$LD_LIBRARY_PATH")
  fi
fi

say "gpu_session part $part, $(date -u +%FT%TZ) on $(hostname), call budget $((deadline - start_s)) s"
say "bundle: $(sed -n 2p "$bundle/MANIFEST.txt"); $(sed -n 3p "$bundle/MANIFEST.txt")"
{
  echo "== nvidia-smi"
  nvidia-smi
  nvidia-smi -q -d CLOCK,PERFORMANCE
  echo "== libraries (LD_LIBRARY_PATH=$LD_LIBRARY_PATH)"
  for f in "$bin"/*; do echo "-- $f"; ldd "$f"; done
  echo "== python"
  python3 -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__,
    "cuda", torch.version.cuda, "visible", torch.cuda.is_available())'
} > "$work/logs/machine.log" 2>&1
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null)
say "GPU: ${gpu:-none visible}"
unresolved=$(grep -a "=> not found" "$work/logs/machine.log" | sort -u)
if [ -n "$unresolved" ]; then
  say "gpu_session: libraries not found (the steps that need them will fail):"
  echo "$unresolved" | sed 's/^/    /' | tee -a "$summary"
fi
if [ -z "$gpu" ] && [ "${HETPLAN_SESSION_WITHOUT_GPU:-0}" != 1 ]; then
  say "gpu_session: no GPU visible (nvidia-smi): nothing to measure here"
  pack
  exit 1
fi
# The hetplan GPU type and the cluster the sweep and the host cost predict for: one GPU of a node
# of this GPU (the device tool lends H100s and H200s). calibrate names the type itself.
# HETPLAN_SESSION_GPU (a rehearsal's stand-in for nvidia-smi's name) picks it without a GPU.
case "${HETPLAN_SESSION_GPU:-$gpu}" in
  *H200*) session_gpu_type=h200 session_cluster=$root/examples/clusters/h200-node.yaml ;;
  *H100*) session_gpu_type=h100-sxm session_cluster=p5.48xlarge:1 ;;
  *)
    session_gpu_type=h100-sxm session_cluster=p5.48xlarge:1
    say "gpu_session: not an H100 or H200: the sweep predicts for an H100 (p5.48xlarge:1)"
    ;;
esac
export HETPLAN_SESSION_GPU_TYPE=$session_gpu_type HETPLAN_SESSION_CLUSTER=$session_cluster
say "GPU type: $session_gpu_type; the sweep predicts for $session_cluster"
pack

# The file of an earlier call's results for PART (gpu-results/PART/results.tgz, or its parts put
# back together), unpacked into DIR; fails when there is none.
earlier_results() {  # earlier_results PART DIR
  local from=$results/$1 into=$2
  mkdir -p "$into"
  if [ -f "$from/results.tgz" ]; then
    tar -C "$into" -xzf "$from/results.tgz"
  elif compgen -G "$from/results.tgz.part*" > /dev/null; then
    cat "$from"/results.tgz.part* | tar -C "$into" -xzf -
  else
    return 1
  fi
}

lines() { if [ -f "$1" ]; then wc -l < "$1"; else echo 0; fi; }

# ---------------------------------------------------------------------------------------------
part_a() {
  # The mbarrier ring's known-answer test first and alone, with a short limit: a phase the
  # hardware never completes would hang it, and in the kernel tests' step that would cost the
  # tests after it (docs/kernels.md, "mbarrier and bulk copies in the emulator").
  local bulk='*BulkCopyRingAndReduce*'
  step gpu_tests_bulk 30 5 "$bin/hetplan_gpu_tests" --gtest_color=no --gtest_filter="$bulk"
  step gpu_tests_kernels 150 15 "$bin/hetplan_gpu_tests" --gtest_color=no \
    --gtest_filter="*KernelCase*:*KernelProperties*:-$bulk"
  step gpu_tests_profiler 210 15 "$bin/hetplan_gpu_tests" --gtest_color=no \
    --gtest_filter='-*KernelCase*:*KernelProperties*'
  for t in bulk kernels profiler; do
    say "  gpu tests ($t):"
    excerpt "$work/logs/gpu_tests_$t.log" \
      '^\[  (PASSED|SKIPPED|FAILED) +\] [0-9]+ tests?|^\[  FAILED  \] .*\([0-9]+ ms\)$|wgmma self-test|bulk-copy self-test|^(bf16 8192|best device copy|[0-9]+ of [0-9]+ GEMMs)' 30
  done
  step kernel_bench 200 15 "$bin/hetplan_kernel_bench" --json "$work/kernel_bench.json"
  # The table's rows (they hold a %copy column; the progress lines do not) of items 5 and 6.
  # Its SM_MHz column: the clock each case ran at (item 15 compares attention's with the layers').
  excerpt "$work/logs/kernel_bench.log" '^(attention|swiglu_bwd)[^ ]* .*%|^copy bandwidth|^clocks|  (incorrect|error)' 40
  # Hardware counters and stall reasons of the attention backward and forward, a copy and a
  # cuBLASLt GEMM as anchors (docs/kernels.md "Hardware counters of our kernels"); exit 3: the
  # timings ran but the counters did not (the log says why, e.g. restricted to admin users).
  step kernel_metrics 60 10 "${metrics_env[@]}" "$HETPLAN_KERNEL_METRICS" --max-seconds 40 \
    --json "$work/kernel_metrics.json"
  excerpt "$work/logs/kernel_metrics.log" '^(GPU |hardware counters|[0-9]+ of [0-9]+ metrics|[a-z_0-9]+ [a-z_]+=.*: )|^  [^ ]' 48
  if [ -s "$work/kernel_bench.json" ]; then
    step attention_vs_sdpa 90 10 python3 scripts/bench_attention_torch.py \
      --ours "$work/kernel_bench.json" --json "$work/attention_torch.json" &&
      excerpt "$work/logs/attention_vs_sdpa.log" '.' 24
    # Item 15: SDPA after 20 ms of GEMMs against SDPA alone, the factor hetplan fit gives SDPA
    # from hetplan's kernels inside layers (forward 1.239, backward 1.210 on the H100 of
    # 2026-11-23).
    step attention_sdpa_after_gemm 90 10 python3 scripts/bench_attention_torch.py \
      --ours "$work/kernel_bench.json" --backends FLASH_ATTENTION --between-gemm-ms 20 \
      --json "$work/attention_torch_after_gemm.json" &&
      excerpt "$work/logs/attention_sdpa_after_gemm.log" 'after GEMMs|^GPU' 24
  else
    say "[skipped] attention_vs_sdpa: the kernel bench wrote no kernel_bench.json"
  fi
  # Extras: attention on each path alone (mma.sync: the sm_80 kernels; wgmma: Hopper's). The
  # wgmma steps need a bundle built with HETPLAN_EXPERIMENTAL_KERNELS=ON (scripts/gpu_bundle.sh).
  for path in mma wgmma; do
    step "attention_$path" 60 10 env HETPLAN_ATTENTION_KERNEL="$path" "$bin/hetplan_kernel_bench" \
      --filter attention --json "$work/kernel_bench_$path.json" &&
      excerpt "$work/logs/attention_$path.log" '^attention[^ ]* .*%' 12
  done
  # The opt-in d = 128 backward that adds dQ with bulk reduces (docs/kernels.md, "dQ by bulk
  # reduce"): checked against the reference by the bench, timed next to attention_wgmma.
  step attention_wgmma_dq_bulk 60 10 env HETPLAN_ATTENTION_KERNEL=wgmma HETPLAN_ATTENTION_DQ=bulk \
    "$bin/hetplan_kernel_bench" --filter attention --json "$work/kernel_bench_wgmma_dq_bulk.json" &&
    excerpt "$work/logs/attention_wgmma_dq_bulk.log" '^attention[^ ]* .*%|  (incorrect|error)' 12
  # The opt-in warp-specialised d = 128 backward (docs/kernels.md, "Warp-specialised backward"):
  # producer warpgroup, mbarrier ring, setmaxnreg; the producer with 16-byte bulk copies (ws) or
  # cp.async (ws-cpasync), or with bulk copies and a dQ-writer warp adding dQ by bulk reduces
  # (ws-dqw); ws-drift (docs/kernels.md, "Consumers that drift apart"): dQ split by keys, a dQ
  # writer per consumer, d = 128 and d = 64 (step attention_wgmma_ws_drift); wg1 (docs/kernels.md,
  # "One warpgroup per block"): the default backward, 64 keys per block, two or three blocks per
  # SM, d = 128 and d = 64. Checked by the bench, timed next to the two above.
  for ws in ws ws-cpasync ws-dqw ws-drift wg1; do
    step "attention_wgmma_${ws//-/_}" 60 10 env HETPLAN_ATTENTION_KERNEL=wgmma \
      HETPLAN_ATTENTION_BWD="$ws" "$bin/hetplan_kernel_bench" --filter attention \
      --json "$work/kernel_bench_wgmma_${ws//-/_}.json" &&
      excerpt "$work/logs/attention_wgmma_${ws//-/_}.log" '^attention[^ ]* .*%|  (incorrect|error)' 12
  done
  # The opt-in ping-pong forward (docs/kernels.md, "Ping-pong forward"): a producer warpgroup
  # with 16-byte bulk copies (pingpong) or cp.async (pingpong-cpasync), two consumers taking turns
  # at the tensor cores. The forward's test shapes (partial tiles, seq 1 and 37) and then its
  # bench shapes, each checked against the reference by the bench; timed next to the default
  # wgmma forward (step attention_wgmma).
  for fwd in pingpong pingpong-cpasync; do
    # shellcheck disable=SC2016  # $1, $2, a and b are the inner shell's
    step "attention_wgmma_fwd_${fwd//-/_}" 60 10 env HETPLAN_ATTENTION_KERNEL=wgmma \
      HETPLAN_ATTENTION_FWD="$fwd" bash -c '"$1" --filter attention_fwd --test-shapes; a=$?
        "$1" --filter attention_fwd --json "$2"; b=$?; exit $((a > b ? a : b))' _ \
      "$bin/hetplan_kernel_bench" "$work/kernel_bench_wgmma_fwd_${fwd//-/_}.json" &&
      excerpt "$work/logs/attention_wgmma_fwd_${fwd//-/_}.log" \
        '^attention[^ ]* .*%|  (incorrect|error)' 20
  done
  # Last: the quick calibration's wall time (item 2) matters less than the attention variants
  # above, and part b calibrates in full; part c falls back on this file only without b's.
  step calibrate_quick 170 40 "$bin/hetplan" calibrate --quick --out "$work/calibration-quick.json"
  rc=$?
  [ "$rc" -ne 99 ] && say "  calibrate --quick: exit $rc (0: complete; target: under 120 s)"
  calibrate_excerpt "$work/logs/calibrate_quick.log"
  [ -f "$work/calibration-quick.json" ] &&
    python3 scripts/calibration_summary.py "$work/calibration-quick.json" > "$work/calibration-quick.summary.txt" 2>&1
  excerpt "$work/calibration-quick.summary.txt" '.' 30
}

# ---------------------------------------------------------------------------------------------
part_b() {
  local cal=$work/calibration.json staged=$session/b-staged
  # A fresh machine: continue the journal an earlier call brought back, if it holds more.
  rm -rf "$staged"
  if [ "${HETPLAN_FRESH:-0}" != 1 ] && earlier_results b "$staged" &&
    [ "$(lines "$staged/calibration.json.journal")" -gt "$(lines "$cal.journal")" ]; then
    cp "$staged"/calibration.json* "$work/"
    say "resuming the journal of an earlier call ($(lines "$cal.journal") lines, gpu-results/b)"
  elif [ -f "$cal.journal" ]; then
    say "resuming this machine's journal ($(lines "$cal.journal") lines)"
  fi
  rm -f "$work/complete"
  # shellcheck disable=SC2086  # HETPLAN_CALIBRATE_ARGS is a list of arguments
  step calibrate_full 3600 40 "$bin/hetplan" calibrate --out "$cal" --resume ${HETPLAN_CALIBRATE_ARGS:-}
  rc=$?
  cat "$work/logs/calibrate_full.log" >> "$work/calibrate-all-calls.log" 2>/dev/null
  case "$rc" in
    0) touch "$work/complete"; say "  calibration complete" ;;
    99) ;;
    *) say "  calibration not complete (exit $rc): run part b again, it continues the journal" ;;
  esac
  calibrate_excerpt "$work/logs/calibrate_full.log"
  [ -f "$cal" ] && python3 scripts/calibration_summary.py "$cal" > "$work/calibration.summary.txt" 2>&1
  # All but the kernels' lines (part a's bench has those; the file keeps them).
  excerpt "$work/calibration.summary.txt" '^([^k]|k[^e]|ke[^r])' 80
  if [ -f "$work/complete" ]; then
    # Item 3: held-out GEMM accuracy on this GPU's tables and the layer corrections.
    step fit 60 10 "$bin/hetplan" fit "$cal" --out "$work/profile.json" --json "$work/fit-quality.json"
    fit_excerpt "$work/logs/fit.log"
  fi
}

# ---------------------------------------------------------------------------------------------
# The calibration the sweep's predictions use: part b's (complete or not), else a's quick one.
sweep_calibration() {
  local staged=$session/c-staged f
  for f in "$session/b/calibration.json" "$session/a/calibration-quick.json"; do
    [ -s "$f" ] && { echo "$f"; return 0; }
  done
  rm -rf "$staged"
  for p in b a; do
    if earlier_results "$p" "$staged/$p" 2>/dev/null; then
      for f in "$staged/$p/calibration.json" "$staged/$p/calibration-quick.json"; do
        [ -s "$f" ] && { echo "$f"; return 0; }
      done
    fi
  done
  return 1
}

# This session's SDPA timings (part a's attention_torch.json, here or among the earlier calls'
# results) as a calibration file; fails when there are none or the import refuses them.
session_sdpa() {
  local f staged=$session/c-staged-a out=$work/input/attention-torch-sdpa.json
  f=$session/a/attention_torch.json
  if [ ! -s "$f" ]; then
    rm -rf "$staged"
    earlier_results a "$staged" 2>/dev/null || return 1
    f=$staged/attention_torch.json
    [ -s "$f" ] || return 1
  fi
  # Timed on this GPU model (an earlier call may have had another machine).
  python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["gpu"] != sys.argv[2])' \
    "$f" "${HETPLAN_SESSION_GPU:-${gpu%%,*}}" 2> /dev/null || return 1
  "$bin/hetplan" import --format torch-sdpa "$f" --gpu-type "$session_gpu_type" --out "$out" \
    > "$work/logs/sdpa_import.log" 2>&1 || return 1
  echo "$out"
}

# The LLaMA rows of the sweep again with the eager operators (HETPLAN_KERNELS_LIB=off): the step
# time with and without hetplan's fused kernels (item 8).
llama_eager() {
  local sweep=$1
  python3 - "$sweep" <<'PY' || return
import json, os, sys
sweep = sys.argv[1]
with open(os.path.join(sweep, "plan.json")) as f:
    configs = json.load(f)["configs"]
llama = {"configs": [c for c in configs if "llama" in c["model"]]}
with open(os.path.join(sweep, "plan-llama.json"), "w") as f:
    json.dump(llama, f, indent=1)
print(f"{len(llama['configs'])} LLaMA-style configurations")
PY
  HETPLAN_KERNELS_LIB=off python3 scripts/reference_train.py --plan "$sweep/plan-llama.json" \
    --out "$sweep/measurements-eager.json" --cluster "$HETPLAN_SESSION_CLUSTER" --warmup 2 --iters 8 \
    --budget-s 3 --hetplan-version "$("$bin/hetplan" --version | awk '{print $NF}')"
  local rc=$?
  python3 - "$sweep" <<'PY' || return
import json, os, sys
sweep = sys.argv[1]
def load(name):
    try:
        with open(os.path.join(sweep, name)) as f:
            return json.load(f)["measurements"]
    except (OSError, ValueError, KeyError):
        return []
with open(os.path.join(sweep, "plan.json")) as f:
    configs = json.load(f)["configs"]
fused = {c["label"]: m for c, m in zip(configs, load("measurements.json"))}
llama = [c for c in configs if "llama" in c["model"]]
def ms(m):
    t = (m or {}).get("iteration_s") or {}
    return f"{1e3 * t['median_s']:9.1f}" if "median_s" in t else f"{'-':>9}"
print(f"{'configuration':40} {'fused ms':>9} {'eager ms':>9}")
for c, m in zip(llama, load("measurements-eager.json")):
    print(f"{c['label']:40} {ms(fused.get(c['label']))} {ms(m)}")
PY
  return "$rc"
}

part_c() {
  local cal cal_type sdpa sweep=$work/sweep files=()
  if cal=$(sweep_calibration); then
    # PyTorch's SDPA timings give the fit the attention the harness runs: this session's (part
    # a), else the shipped ones of an H100 when this is one.
    mkdir -p "$work/input"
    cp "$cal" "$work/input/"
    cal_type=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["context"]["gpu_type"])' \
      "$cal" 2> /dev/null)
    [ "$cal_type" = "$session_gpu_type" ] ||
      say "sweep calibration: of a ${cal_type:-unknown} GPU, not this $session_gpu_type (an earlier call's machine): the sweep's predictions of this GPU cannot use it"
    files=("$work/input/$(basename "$cal")")
    if sdpa=$(session_sdpa); then
      files+=("$sdpa")
      say "sweep calibration: $cal (+ this session's SDPA attention timings)"
    elif [ "$session_gpu_type" = h100-sxm ]; then
      files+=("$root/calibration_data/measured/h100-sxm/attention-torch-sdpa-2026-11-22.json")
      say "sweep calibration: $cal (+ the shipped H100 SDPA attention timings)"
    else
      say "sweep calibration: $cal (no SDPA timings of this GPU: attention from our kernels')"
    fi
    if ! step fit_check 60 10 "$bin/hetplan" fit "${files[@]}" --out "$work/profile-check.json" \
      --json "$work/fit-quality.json"; then
      files=("${files[0]}")
      say "  the fit refused the two together (logs/fit_check.log): the calibration alone"
    fi
    fit_excerpt "$work/logs/fit_check.log"
  else
    say "sweep calibration: none from parts a or b: datasheet priors only"
  fi
  step measure_sweep 330 20 bash scripts/measure_sweep.sh "$sweep" "${files[@]}"
  rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 99 ] && [ -f "$sweep/measurements.json" ]; then
    # Stopped part-way: compare what was measured.
    step measure_sweep_compare 30 5 env SWEEP_ARGS=--compare-only \
      bash scripts/measure_sweep.sh "$sweep" "${files[@]}"
    excerpt "$work/logs/measure_sweep_compare.log" '.' 60
  else
    excerpt "$work/logs/measure_sweep.log" '^( ?[0-9]+ |iteration time|peak memory|out of memory|hetplan predict|with datasheet|sweep done|fitting|[0-9]+ configurations)' 60
  fi
  # PyTorch's host cost per kernel of an eager step, the host floor's coefficient (item 4): the
  # harness on GPT-2 medium at sequence 128, mb 1, where the step is the host's; -> a calibration
  # file with a `host` record (docs/formats.md) for `hetplan fit`.
  step host_cost 90 10 python3 scripts/measure_host_cost.py --hetplan "$bin/hetplan" \
    --out "$work/host-cost.json" --calibration "${files[@]}"
  excerpt "$work/logs/host_cost.log" 'us per kernel|wrote|measure_host_cost|Error' 6
  step fused_kernels_tests 90 10 python3 -m unittest -v tests/python/test_fused_kernels.py
  excerpt "$work/logs/fused_kernels_tests.log" '^(Ran|OK|FAILED)|\.\.\. (FAIL|ERROR|skipped)' 20
  for model in gpt2-medium examples/models/llama-370m.yaml; do
    name=$(basename "$model" .yaml)
    step "harness_vs_model_$name" 90 10 python3 scripts/harness_vs_model.py --model "$model" \
      --micro-batch 1 --device cuda --json "$work/harness_vs_model_$name.json"
    excerpt "$work/logs/harness_vs_model_$name.log" '^layer|forward|backward|total' 16
  done
  if [ -f "$sweep/plan.json" ]; then
    export -f llama_eager
    # shellcheck disable=SC2016  # $1 is the inner shell's
    step llama_eager 150 10 bash -c 'llama_eager "$1"' _ "$sweep"
    excerpt "$work/logs/llama_eager.log" '^(configuration|[a-z].* s[0-9]+ mb|[0-9]+ LLaMA)' 12
  fi
  # The harness run the way plain PyTorch runs (fp32 parameters under autocast, eager operators,
  # autograd's accumulation; reference/plain.py) against `--framework pytorch`: issue 36's
  # single-GPU target. Then its operators on the device.
  step plain_pytorch_sweep 330 20 env SWEEP_ARGS="--framework pytorch --style pytorch" \
    bash scripts/measure_sweep.sh "$work/sweep-pytorch" "${files[@]}"
  excerpt "$work/logs/plain_pytorch_sweep.log" '^( ?[0-9]+ |iteration time|peak memory|out of memory|hetplan predict)' 40
  # The same, one micro-batch a step (quick set): plain PyTorch frees its gradients after each step
  # (zero_grad(set_to_none=True)), so these peak without them (docs/costmodel.md step 7).
  step plain_pytorch_one_microbatch 150 10 env \
    SWEEP_ARGS="--framework pytorch --style pytorch --quick --one-microbatch" \
    bash scripts/measure_sweep.sh "$work/sweep-pytorch-one-microbatch" "${files[@]}"
  excerpt "$work/logs/plain_pytorch_one_microbatch.log" '^( ?[0-9]+ |iteration time|peak memory|out of memory)' 20
  step harness_vs_model_plain 90 10 python3 scripts/harness_vs_model.py --style pytorch \
    --model examples/models/llama-370m.yaml --micro-batch 1 --device cuda \
    --json "$work/harness_vs_model_plain_llama-370m.json"
  excerpt "$work/logs/harness_vs_model_plain.log" '^layer|forward|backward|accumulation' 16
  step parallel_harness_tests 150 10 python3 -m unittest -v tests/python/test_parallel_harness.py
  excerpt "$work/logs/parallel_harness_tests.log" '^(Ran|OK|FAILED)|\.\.\. (FAIL|ERROR|skipped)' 20
}

"part_$part"
finish
exit 0
