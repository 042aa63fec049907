#!/usr/bin/env bash
# Side by side on one GPU: llm.c's train_gpt2cu and our ./train_gpt2, GPT-2 124M from random init (llm.c: -e d12), the
# same llm.c-format token shards (made here by our prep_data), equal micro-batch B x T, no gradient accumulation.
# Prints ms/step, tok/s and peak memory of each and the ratios, and one RESULT line. llm.c is never part of this
# repository: point --llmc at a copy (git clone https://github.com/karpathy/llm.c; on the GPU machine, which has
# no network, carry it with the call: docs/GPU.md). --help lists the options. test/test_bench_vs_llmc.sh runs it
# against a fake train_gpt2cu that prints llm.c's lines (the parsing and arithmetic are tested without a GPU).
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/bench_vs_llmc.sh --llmc DIR [options]

  --llmc DIR        a copy of karpathy/llm.c, e.g. git clone https://github.com/karpathy/llm.c ../llm.c
                    (its train_gpt2cu is built there with nvcc unless --llmc-bin is given)
  --llmc-bin FILE   an already built train_gpt2cu (then --llmc is not needed)
  --ours FILE       our trainer (default: ./train_gpt2, else build/train_gpt2)
  --prep FILE       our shard writer (default: ./prep_data, else build/prep_data)
  --text PATH       raw text to tokenize (default: data/austen, 6 novels, ~1.1M GPT-2 tokens; paragraphs are
                    documents)
  --max-docs N      tokenize at most N documents (default: all)
  --batch B         micro-batch size of both (default 16)
  --seq T           sequence length of both (default 1024)
  --steps N         optimizer steps of each run (default 30)
  --warmup W        leading steps left out of the averages (default 5: cuBLAS/cuDNN set-up)
  --recompute R     llm.c -r R and our --recompute R (default 0: keep every activation)
  --model NAME      our --model (default gpt2-124m, llm.c's d12); the tests use gpt2-tiny on the CPU
  --device D        our --device (default cuda)
  --no-cudnn        build llm.c without cuDNN attention (default: with it when CUDNN_FRONTEND_PATH or
                    ~/cudnn-frontend/include has cudnn_frontend.h, as ours uses cuDNN when built with it)
  --out DIR         shards and logs (default /tmp/bench_vs_llmc)
Relative paths are read from the directory the script is started in.
Environment: NVCC (default nvcc), LLMC_NVCC_FLAGS (added to llm.c's compile line), CUDA_ARCH (e.g. 90; default:
nvidia-smi's compute capability), CUDNN_FRONTEND_PATH (the frontend's root or its include/ directory).
Peak memory: each program's own report (llm.c: "device memory usage" after its allocations, context included;
ours: the largest mem_peak_bytes of its JSONL log, our allocations only) and, where nvidia-smi exists, the GPU's
memory.used sampled every 100 ms during the run minus its value before (the same yardstick for both; the ratio
uses it when present).
EOF
}

die() { echo "bench_vs_llmc: $*" >&2; exit 1; }
# a flag's value, which must be there: "FLAG needs a value" (set -u said "$2: unbound variable")
need() { [ $# -ge 2 ] || { usage >&2; die "$1 needs a value"; }; }
# a path as given, from the directory the script was started in (it runs at the repository root)
from_here() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }

LLMC="" LLMC_BIN="" OURS="" PREP="" TEXT="data/austen" MAX_DOCS="" B=16 T=1024 STEPS=30 WARMUP=5 RECOMPUTE=0
MODEL="gpt2-124m" DEVICE="cuda" CUDNN=auto OUT="/tmp/bench_vs_llmc"
while [ $# -gt 0 ]; do
  case "$1" in
    --llmc|--llmc-bin|--ours|--prep|--text|--max-docs|--batch|--seq|--steps|--warmup|--recompute|--model|--device|--out)
      need "$@" ;;
  esac
  case "$1" in
    --llmc) LLMC=$(from_here "$2"); shift 2 ;;
    --llmc-bin) LLMC_BIN=$(from_here "$2"); shift 2 ;;
    --ours) OURS=$(from_here "$2"); shift 2 ;;
    --prep) PREP=$(from_here "$2"); shift 2 ;;
    --text) TEXT=$(from_here "$2"); shift 2 ;;
    --max-docs) MAX_DOCS="$2"; shift 2 ;;
    --batch) B="$2"; shift 2 ;;
    --seq) T="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    --warmup) WARMUP="$2"; shift 2 ;;
    --recompute) RECOMPUTE="$2"; shift 2 ;;
    --model) MODEL="$2"; shift 2 ;;
    --device) DEVICE="$2"; shift 2 ;;
    --no-cudnn) CUDNN=0; shift ;;
    --out) OUT=$(from_here "$2"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown option '$1'" ;;
  esac
done
cd "$(dirname "$0")/.."
# (no leading zero: bash's arithmetic reads 010 as octal 8, the programs as 10; at most 9 digits: no overflow)
for pair in batch:B seq:T steps:STEPS warmup:WARMUP recompute:RECOMPUTE; do
  v=${pair#*:}
  [[ "${!v}" =~ ^(0|[1-9][0-9]{0,8})$ ]] || die "--${pair%%:*} must be a whole number below 10^9, without leading zeros (got '${!v}')"
done
[ "$B" -ge 1 ] && [ "$T" -ge 2 ] || die "--batch must be >= 1 and --seq >= 2"
[ "$STEPS" -gt "$WARMUP" ] || die "--steps ($STEPS) must exceed --warmup ($WARMUP): no step would be timed"
if [ -z "$LLMC_BIN" ] && [ -z "$LLMC" ]; then
  usage >&2
  die "no llm.c: pass --llmc DIR (a copy of llm.c: git clone https://github.com/karpathy/llm.c DIR) or --llmc-bin"
fi
pick() { for f in "$@"; do [ -x "$f" ] && { echo "$f"; return 0; }; done; return 1; }
OURS=${OURS:-$(pick ./train_gpt2 build/train_gpt2 || true)}
PREP=${PREP:-$(pick ./prep_data build/prep_data || true)}
[ -n "$OURS" ] && [ -x "$OURS" ] || die "our train_gpt2 is not built (--ours FILE; cmake --build build --target train_gpt2)"
[ -n "$PREP" ] && [ -x "$PREP" ] || die "prep_data is not built (--prep FILE; cmake --build build --target prep_data)"
[ -e "$TEXT" ] || die "--text $TEXT does not exist"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# ---- llm.c's train_gpt2cu: built from the copy with its Makefile's flags (nvcc directly: no make needed) ----
# The linker arguments for libraries NAME...: -L DIR -lNAME, or the versioned file itself where a directory has only
# that (pip wheels: libcudnn.so.9), passed through -Xlinker (nvcc refuses a .so.N operand); a run path for each
# directory outside the loader's default ones (a library found only in a wheel's folder would not load).
link_flags() {
  local name d f dirs=()
  IFS=: read -ra dirs <<<"${LD_LIBRARY_PATH:-}"
  dirs+=("${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu /usr/lib64)
  while IFS= read -r d; do dirs+=("$d"); done < <(python3 -c 'import glob, site; [print(p) for s in site.getsitepackages() for p in glob.glob(s + "/nvidia/*/lib")]' 2>/dev/null || true)
  dirs+=("${CUDA_HOME:-/usr/local/cuda}/lib64/stubs")  # last: libnvidia-ml without a driver (link only)
  for name in "$@"; do
    f=""
    for d in "${dirs[@]}"; do
      [ -n "$d" ] || continue
      if [ -e "$d/lib$name.so" ]; then f="-L$d -l$name"; break; fi
      local v; v=$(ls "$d/lib$name.so."* 2>/dev/null | head -1 || true)
      if [ -n "$v" ]; then f="-Xlinker $v"; break; fi
    done
    echo "${f:--l$name}"
    case "$d" in
      ""|*/stubs|/usr/lib/x86_64-linux-gnu|/usr/lib64) ;;  # stubs: link only; the others: the loader's own
      *) [ -n "$f" ] && echo "-Xlinker -rpath,$d" ;;
    esac
  done
}
cudnn_include() {  # the directory holding cudnn.h where the compiler would not look by itself ("" if none)
  local d
  for d in ${CUDNN_PATH:+"$CUDNN_PATH/include"} \
           $(python3 -c 'import glob, site; [print(p) for s in site.getsitepackages() for p in glob.glob(s + "/nvidia/cudnn/include")]' 2>/dev/null || true); do
    [ -f "$d/cudnn.h" ] && { echo "$d"; return; }
  done
}
if [ -z "$LLMC_BIN" ]; then
  [ -f "$LLMC/train_gpt2.cu" ] || die "--llmc $LLMC has no train_gpt2.cu: is it a copy of https://github.com/karpathy/llm.c?"
  NVCC=${NVCC:-nvcc}
  command -v "$NVCC" >/dev/null || die "nvcc not found (set NVCC)"
  ARCH=${CUDA_ARCH:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ' || true)}
  # CUDA 13 dropped cudaMemAdvise's int-device form, which llm.c (master, 2025-05) calls: an overload of ours,
  # force-included, maps it onto the cudaMemLocation form (no effect before CUDA 13)
  cat > "$OUT/llmc_cuda13_compat.h" <<'EOF_COMPAT'
#pragma once
#include <cuda_runtime.h>
#if CUDART_VERSION >= 13000
inline cudaError_t cudaMemAdvise(const void* p, size_t n, cudaMemoryAdvise advice, int device) {
    cudaMemLocation loc{};
    loc.type = device == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    loc.id = device == cudaCpuDeviceId ? 0 : device;
    return cudaMemAdvise(p, n, advice, loc);
}
#endif
EOF_COMPAT
  FLAGS=(--threads=0 -t=0 --use_fast_math -std=c++17 -O3 -DENABLE_BF16 -include "$OUT/llmc_cuda13_compat.h")
  [ -n "$ARCH" ] && FLAGS+=("--generate-code" "arch=compute_$ARCH,code=[compute_$ARCH,sm_$ARCH]")
  FE=${CUDNN_FRONTEND_PATH:-}
  [ -z "$FE" ] && [ -f "$HOME/cudnn-frontend/include/cudnn_frontend.h" ] && FE="$HOME/cudnn-frontend/include"
  [ -n "$FE" ] && [ -f "$FE/include/cudnn_frontend.h" ] && FE="$FE/include"  # our convention (the root), or llm.c's
  OBJS=() LIBS=(cublas cublasLt)
  # NVML (llm.c's GPU telemetry, used only when nvml.h is found): linked where the driver's library is
  [ "$(link_flags nvidia-ml)" != "-lnvidia-ml" ] && LIBS+=(nvidia-ml)
  LLMC_ATTN="" MAIN_OBJ=""
  if [ "$CUDNN" != 0 ] && [ -n "$FE" ] && [ -f "$FE/cudnn_frontend.h" ]; then
    CUDNN_INC=$(cudnn_include)
    CUDNN_FLAGS=(-DENABLE_CUDNN "-I$FE" ${CUDNN_INC:+"-I$CUDNN_INC"})
    mkdir -p "$LLMC/build"
    # the two files side by side (each minutes of nvcc; the GPU job's limit holds the build and both runs), then
    # the link; train_gpt2.cu compiled for cuDNN is compiled again without it if cudnn_att.cpp fails
    echo "llm.c: compiling llmc/cudnn_att.cpp (cuDNN attention, frontend $FE${CUDNN_INC:+, cudnn.h in $CUDNN_INC})" \
         "and train_gpt2.cu, side by side"
    (cd "$LLMC" && "$NVCC" -c "${FLAGS[@]}" "${CUDNN_FLAGS[@]}" ${LLMC_NVCC_FLAGS:-} llmc/cudnn_att.cpp \
       -o build/cudnn_att.o) >"$OUT/llmc_cudnn_att.log" 2>&1 &
    att=$!
    (cd "$LLMC" && "$NVCC" -c "${FLAGS[@]}" "${CUDNN_FLAGS[@]}" ${LLMC_NVCC_FLAGS:-} train_gpt2.cu \
       -o build/train_gpt2.o) >"$OUT/llmc_train_gpt2.log" 2>&1 &
    main=$!
    att_rc=0 main_rc=0
    wait "$att" || att_rc=$?
    wait "$main" || main_rc=$?
    cat "$OUT/llmc_cudnn_att.log" "$OUT/llmc_train_gpt2.log"
    if [ "$att_rc" = 0 ]; then
      [ "$main_rc" = 0 ] || die "compiling llm.c's train_gpt2.cu failed (see above)"
      MAIN_OBJ=build/train_gpt2.o
      OBJS+=(build/cudnn_att.o) LIBS+=(cudnn nvrtc)  # the frontend compiles some engines at run time (NVRTC)
      LLMC_ATTN="cuDNN"
    else  # a comparison without cuDNN beats none: ours then runs with cuDNN, and the summary says llm.c did not
      LLMC_ATTN="its own kernels (llmc/cudnn_att.cpp did not compile, see above)"
    fi
  fi
  if [ -z "$LLMC_ATTN" ]; then
    LLMC_ATTN="its own kernels (no cudnn-frontend: set CUDNN_FRONTEND_PATH)"
    [ "$CUDNN" = 0 ] && LLMC_ATTN="its own kernels (--no-cudnn)"
  fi
  verb=compiling; [ -n "$MAIN_OBJ" ] && verb=linking
  echo "llm.c: $verb train_gpt2cu (bf16, attention: $LLMC_ATTN)"
  # shellcheck disable=SC2046
  (cd "$LLMC" && "$NVCC" "${FLAGS[@]}" ${LLMC_NVCC_FLAGS:-} "${MAIN_OBJ:-train_gpt2.cu}" "${OBJS[@]}" \
     $(link_flags "${LIBS[@]}") -o train_gpt2cu) || die "building llm.c's train_gpt2cu failed (see above)"
  LLMC_BIN="$LLMC/train_gpt2cu"
fi
[ -x "$LLMC_BIN" ] || die "$LLMC_BIN is not an executable"
LLMC_BIN=$(cd "$(dirname "$LLMC_BIN")" && pwd)/$(basename "$LLMC_BIN")

# ---- the shards: llm.c's format (256 x int32 header, magic 20240520, version 1, uint16 GPT-2 tokens) ----
PREFIX="$OUT/shards/text"
echo "shards: $PREP (GPT-2 tokenizer, flat layout) of $TEXT -> ${PREFIX}_{train,val}_*.bin"
"$PREP" --input "$TEXT" --doc-sep blank --tokenizer gpt2 --layout flat --val-fraction 0.05 --out "$PREFIX" \
  --overwrite --quiet ${MAX_DOCS:+--max-docs "$MAX_DOCS"} > "$OUT/prep.log" 2>&1 || { cat "$OUT/prep.log"; die "prep_data failed"; }
TRAIN_GLOB="${PREFIX}_train_*.bin" VAL_GLOB="${PREFIX}_val_*.bin"
for g in "$TRAIN_GLOB" "$VAL_GLOB"; do compgen -G "$g" >/dev/null || die "prep_data wrote no $g"; done

# ---- peak GPU memory by nvidia-smi, the same yardstick for both (where there is one) ----
SMI_PID=""
smi_start() {  # FILE: memory.used (MiB) every 100 ms; the first line is the value before the run
  command -v nvidia-smi >/dev/null || return 0
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 > "$1" 2>/dev/null || return 0
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 -lms 100 >> "$1" 2>/dev/null &
  SMI_PID=$!
}
smi_stop() {  # FILE -> peak minus the value before, MiB ("" without nvidia-smi)
  if [ -n "$SMI_PID" ]; then kill "$SMI_PID" 2>/dev/null || true; wait "$SMI_PID" 2>/dev/null || true; SMI_PID=""; fi
  [ -s "$1" ] || return 0
  awk 'NR == 1 { base = $1; peak = $1 } $1 + 0 > peak { peak = $1 + 0 } END { print peak - base }' "$1"
}
trap 'smi_stop /dev/null >/dev/null' EXIT  # a run that dies leaves no sampler polling the GPU through later jobs

# ---- llm.c ----
echo "llm.c: $LLMC_BIN -e d12 -b $B -t $T -x $STEPS -r $RECOMPUTE"
smi_start "$OUT/llmc.smi"
( cd "$OUT" && "$LLMC_BIN" -i "$TRAIN_GLOB" -j "$VAL_GLOB" -e d12 -b "$B" -t "$T" -d $((B * T)) -x "$STEPS" \
    -r "$RECOMPUTE" -z 0 -l 3e-4 -u 0 -v "$STEPS" -m 1 -s 0 -h 0 -y 0 -lg -1 ) > "$OUT/llmc.log" 2>&1 \
  || { tail -30 "$OUT/llmc.log"; die "llm.c's run failed (log: $OUT/llmc.log)"; }
LLMC_SMI=$(smi_stop "$OUT/llmc.smi")

# ---- ours ----
echo "ours:  $OURS --model $MODEL --device $DEVICE --batch-size $B --seq-len $T --steps $STEPS --recompute $RECOMPUTE"
rm -f "$OUT/ours.jsonl"
smi_start "$OUT/ours.smi"
"$OURS" --model "$MODEL" --device "$DEVICE" --train-data "$TRAIN_GLOB" --val-data "$VAL_GLOB" --batch-size "$B" \
  --seq-len "$T" --steps "$STEPS" --recompute "$RECOMPUTE" --lr 3e-4 --warmup 0 --eval-interval 0 \
  --eval-tokens $((B * T)) --log "$OUT/ours.jsonl" --log-interval 1 > "$OUT/ours.log" 2>&1 \
  || { tail -30 "$OUT/ours.log"; die "our run failed (log: $OUT/ours.log)"; }
OURS_SMI=$(smi_stop "$OUT/ours.smi")
OURS_DEVICE=$(grep -m1 '^device:' "$OUT/ours.log" || true)
echo "ours:  $OURS_DEVICE"
[[ "$OURS_DEVICE" == *"fp32 storage"* ]] && die "$OURS is the FP32 build; llm.c runs bf16
---> HINT: rebuild the BF16 trainer: rm -f train_gpt2 && cmake --build build --target train_gpt2"

# ---- the numbers: mean ms over steps warmup+1..steps; tok/s = B T / that mean (both from per-step times) ----
# llm.c's step line: "step %4d/%d | loss %7.6f (%+.2fz)| norm %6.4f (%+.2fz)| lr %.2e | %.2f ms | %.1f%% bf16 MFU |
# %.0f tok/s" (its tok/s is a running average, not used); its memory line: "device memory usage: %zd MiB / %zd MiB"
read -r LLMC_N LLMC_MS < <(awk -v w="$WARMUP" '
  /^step +[0-9]+\/[0-9]+ \|/ {
    split($2, s, "/"); n = s[1] + 0
    for (i = 1; i <= NF; i++) if ($(i + 1) == "ms") { ms[n] = $i + 0 }
  }
  END { c = 0; t = 0; for (k in ms) if (k + 0 > w) { c++; t += ms[k] } printf "%d %.9g\n", c, c ? t / c : 0 }' "$OUT/llmc.log")
LLMC_OWN=$(awk '/^device memory usage: [0-9]+ MiB/ { v = $4 } END { print v + 0 }' "$OUT/llmc.log")
# ours: the JSONL records {"type":"step","step":N,...,"ms_per_step":X,"mem_peak_bytes":Y} (train/metrics_log.h)
read -r OURS_N OURS_MS OURS_OWN < <(awk -v w="$WARMUP" '
  /"type":"step"/ {
    match($0, /"step":[0-9]+/); n = substr($0, RSTART + 7, RLENGTH - 7) + 0
    match($0, /"ms_per_step":[0-9.eE+-]+/); ms[n] = substr($0, RSTART + 14, RLENGTH - 14) + 0
    match($0, /"mem_peak_bytes":[0-9]+/); m = substr($0, RSTART + 17, RLENGTH - 17) + 0; if (m > peak) peak = m
  }
  END { c = 0; t = 0; for (k in ms) if (k + 0 > w) { c++; t += ms[k] }
        printf "%d %.9g %.9g\n", c, c ? t / c : 0, peak / 1048576 }' "$OUT/ours.jsonl")
want=$((STEPS - WARMUP))
[ "$LLMC_N" -eq "$want" ] || die "llm.c's log has $LLMC_N timed step lines, expected $want (log: $OUT/llmc.log)"
[ "$OURS_N" -eq "$want" ] || die "our JSONL has $OURS_N timed step records, expected $want ($OUT/ours.jsonl)"

awk -v b="$B" -v t="$T" -v lm="$LLMC_MS" -v om="$OURS_MS" -v lo="$LLMC_OWN" -v oo="$OURS_OWN" \
    -v ls="${LLMC_SMI:-}" -v os="${OURS_SMI:-}" -v n="$want" -v w="$WARMUP" -v model="$MODEL" 'BEGIN {
  ltok = b * t * 1000 / lm; otok = b * t * 1000 / om
  printf "\nllm.c d12 vs ours %s, B=%d T=%d, mean of steps %d..%d (%d steps each)\n", model, b, t, w + 1, w + n, n
  printf "%-14s %12s %12s %16s %18s\n", "", "ms/step", "tok/s", "own peak MiB", "nvidia-smi MiB"
  printf "%-14s %12.2f %12.0f %16.0f %18s\n", "llm.c", lm, ltok, lo, ls == "" ? "n/a" : ls
  printf "%-14s %12.2f %12.0f %16.1f %18s\n", "ours", om, otok, oo, os == "" ? "n/a" : os
  mem = (ls != "" && os != "" && ls + 0 > 0) ? sprintf("%.3f", os / ls) : "n/a"
  printf "%-14s %12.3f %12.3f %16s %18s\n", "ours / llm.c", om / lm, otok / ltok, "(not comparable)", mem
  printf "RESULT bench_vs_llmc B=%d T=%d steps=%d llmc_ms=%.3f ours_ms=%.3f llmc_tok_s=%.0f ours_tok_s=%.0f " \
         "tok_s_ratio=%.4f llmc_own_mib=%.0f ours_own_mib=%.1f llmc_smi_mib=%s ours_smi_mib=%s smi_mem_ratio=%s\n",
         b, t, n, lm, om, ltok, otok, otok / ltok, lo, oo, ls == "" ? "na" : ls, os == "" ? "na" : os,
         mem == "n/a" ? "na" : mem
}'
echo "logs: $OUT/llmc.log $OUT/ours.log $OUT/ours.jsonl"
