#!/usr/bin/env bash
# scripts/gpu_verify.sh -- build and test the PRAC trainer on a GPU machine in one command (docs/GPU.md).
#
#   bash scripts/gpu_verify.sh                 on the GPU machine (device tool: carry [".gpu_debs"]), from the repo
#   DRY_RUN=1 bash scripts/gpu_verify.sh       here, without a GPU (also: --dry-run, --no-gpu-ok); it runs on a
#                                              copy of the working tree in $WORK/src (--in-place: in this checkout,
#                                              building into its build/)
#   bash scripts/gpu_verify.sh --list-packages the Debian packages to carry, as "group package" lines
#                                              (scripts/fetch_gpu_debs.sh downloads exactly these)
#
# Steps (each one is timed and recorded; a failed step does not stop the later ones):
#   env     the machine: GPU (nvidia-smi), nvcc, g++, cmake, python3/torch, pip nvidia-* packages and their paths
#   deps    for every build dependency the system lacks, unpack its .debs from .gpu_debs/ with `dpkg -x` into a
#           private prefix (PREFIX, default /opt/pracdeps/<group>; never into /), put the prefix on
#           CMAKE_PREFIX_PATH, and link the shared libraries the system lacks into PREFIX/lib (LD_LIBRARY_PATH);
#           the cudnn-frontend headers (a zip in .gpu_debs/) go to PREFIX/cudnn_frontend (CUDNN_FRONTEND_PATH)
#           when python's nvidia-cudnn-frontend is not installed
#   build   make PRAC_CUDA=ON CUDA_ARCHS=<the GPU's arch, 9.0 -> 90a-real> (BF16, BUILD_DIR=build); after a
#           failure the build goes on with -k so that everything that compiles can still be tested
#   gpu     REQUIRE_GPU=1 ctest --test-dir build -L gpu --output-on-failure
#   bench   run_benchmarks(): every executable build/tools/bench_gpu* with a time limit, run with $BENCH_ARGS,
#           then (BENCH_OVERLAP=D, default 2; 0: not) bench_gpu --quick --models llama-130m --refresh-overlap D
#   fp32    the same build with PRECISION=FP32 in build-fp32 (FP32_TARGETS=gpu: only the GPU tests' targets,
#           the default, to fit the time budget; FP32_TARGETS=all: everything; its trainers stay in build-fp32,
#           the root's are the BF16 build's), then its GPU tests; both SKIP when less than FP32_MIN seconds are
#           left (scripts/gpu_followup.sh's job fp32 runs them then)
#   cpu     the CPU suite: ctest --test-dir build -LE gpu -j (CI runs it too; here it checks the GPU image)
# Then a summary table (step/test, status, seconds), summary.txt, results.json and logs.tar.gz under $OUT
# (the device tool returns $OUT; at most 8 files) or under WORK (/tmp/gpu_verify) when OUT is unset. The same files
# are rewritten after every step (summary "RESULT: INCOMPLETE"), so a call killed at its limit still returns the
# steps that finished and their logs.
# Exit status: 0 when no step or test failed and, outside a dry run, the BF16 build and its GPU tests were not
# skipped; 1 otherwise. The RESULT line names the steps that were skipped (FP32 and benchmarks: no time left).
#
# DRY_RUN=1 (no GPU, on the dev machine): copies the working tree as the device tool would (tracked and
# untracked-not-ignored files, plus .gpu_debs) to WORK/src and runs there, so the shared checkout's build/
# and root binaries are untouched; forces the .deb prefix logic (FORCE_DEBS=1) against WORK/pracdeps even
# though the system has the packages; builds into WORK/build*; GPU tests skip (exit 77) unless REQUIRE_GPU=1.
#
# Environment knobs (all optional):
#   CUDA_ARCHS      override the architecture list (default: from nvidia-smi compute_cap; dry run: 90a-real)
#   TOTAL_BUDGET    seconds for the whole script (default 540: the device tool allows 600 per command; dry run 3600)
#   BUILD_CAP       seconds per build step, configure included (default 300; dry run 2400)
#   CPU_CAP         seconds for the CPU suite (default 200, and what is left of the budget; dry run 1200)
#   GPU_CAP         seconds for each build's GPU tests (default 300: 185 s on the 2026-11-27 H100, and the tests have
#                   grown since; each test at most 180: gpu.trainer_cuda.{cpu,nccl,resume} run about 20 short trainings).
#                   ctest runs them with -V: every test's output is in the log as it runs (the JUnit file is written
#                   only when ctest ends, so a step killed at its cap kept no passing test's figures)
#   JOBS            parallel jobs (default nproc)
#   FP32_TARGETS    gpu (default) | all | none
#   FP32_MIN        seconds the FP32 build and tests need (default 230: 50 + 100 on the 2026-11-27 H100 by hand,
#                   before configure and the tests added since); with less left both are skipped
#   STEPS           the steps to run after env and deps (default build,gpu,bench,fp32,cpu; cpu also needs SKIP_CPU
#                   unset), e.g. STEPS=fp32 on a warm machine whose first call skipped it
#   FORCE_DEBS=1    use the carried .debs even where the system has the package
#   PREFIX          where .debs are unpacked (default /opt/pracdeps; dry run WORK/pracdeps)
#   WORK            scratch folder for logs (and, in a dry run, the copy and the builds): default /tmp/gpu_verify
#   REQUIRE_GPU     default 1 (0 in a dry run): a GPU test that finds no device fails instead of skipping
#   SKIP_CPU=1      leave out the CPU suite;  BENCH_TIMEOUT  seconds per benchmark (default 90)
#   BENCH_ARGS      arguments of every benchmark (default --quick: fits the device call's budget)
#   BENCH_OVERLAP   D of the extra overlapped bench_gpu run (default 2; 0 leaves it out)
#   CLEAN=0         keep existing build dirs (a second call on a still-warm device machine rebuilds incrementally)
#                   and reuse PREFIX as an earlier call unpacked it (its env.sh)
#   USE_MAKE=0      call cmake (Ninja) directly, as the script does by itself where make is missing
#   GIT_REV         a label for the summary and results.json (the device copy has no .git): pass the commit
set -euo pipefail

SELF="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
REPO="$(cd "$(dirname "$SELF")/.." && pwd)"

# ---------------------------------------------------------------------------------------------------------------
# Dependency groups: name | Debian packages (bookworm names) | headers (any one, under an include root) |
# libraries (any one, under a lib root; "cmake:NAME" = a CMake config package NAME). The runtime-only packages
# (RUNTIME_PKGS) are unpacked always; their libraries are linked into PREFIX/lib only where the system lacks them.
# Checked by reading each package's Depends (scripts/fetch_gpu_debs.sh prints what stays uncovered).
# ---------------------------------------------------------------------------------------------------------------
ARCH_TRIPLET="x86_64-linux-gnu"
DEP_GROUPS=(
  "openblas|libopenblas-openmp-dev libopenblas0-openmp|cblas.h $ARCH_TRIPLET/openblas-openmp/cblas.h $ARCH_TRIPLET/openblas-pthread/cblas.h openblas/cblas.h|libopenblas.so openblas-openmp/libopenblas.so openblas-pthread/libopenblas.so"
  "lapacke|liblapacke-dev liblapacke libtmglib3|lapacke.h openblas/lapacke.h|liblapacke.so"
  "nlohmann_json|nlohmann-json3-dev|nlohmann/json.hpp|cmake:nlohmann_json"
  "gtest|libgtest-dev|gtest/gtest.h|libgtest.a libgtest.so"
  "pcre2|libpcre2-dev libpcre2-8-0|pcre2.h|libpcre2-8.so"
  "sentencepiece|libsentencepiece-dev libsentencepiece0|sentencepiece_processor.h|libsentencepiece.so"
  "libarchive|libarchive-dev libarchive13|archive.h|libarchive.so"
  "zlib|zlib1g-dev zlib1g|zlib.h|libz.so"
  "lzma|liblzma-dev liblzma5|lzma.h|liblzma.so"
  "zstd|libzstd-dev libzstd1|zstd.h|libzstd.so"
)
# libgfortran5+libquadmath0: OpenBLAS/LAPACKE; the rest: libarchive13's Depends (libxml2 needs libicu72).
RUNTIME_PKGS="libgfortran5 libquadmath0 libxml2 libicu72 libnettle8 liblz4-1 libacl1 libbz2-1.0"

usage() { sed -n '2,/^set -euo/p' "$SELF" | sed '$d' | sed 's/^# \{0,1\}//'; }

DRY_RUN="${DRY_RUN:-0}"
IN_COPY="${GPU_VERIFY_IN_COPY:-0}"
IN_PLACE=0
for a in "$@"; do
  case "$a" in
    --list-packages)
      for g in "${DEP_GROUPS[@]}"; do
        IFS='|' read -r name pkgs _ _ <<<"$g"
        for p in $pkgs; do echo "$name $p"; done
      done
      for p in $RUNTIME_PKGS; do echo "runtime $p"; done
      exit 0 ;;
    --dry-run|--no-gpu-ok) DRY_RUN=1 ;;
    --in-place) IN_PLACE=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $a (see --help)" >&2; exit 2 ;;
  esac
done

WORK="${WORK:-/tmp/gpu_verify}"
mkdir -p "$WORK"

# ---- dry run: run on a copy of the working tree, as the device tool does ---------------------------------------
if [ "$DRY_RUN" = 1 ] && [ "$IN_COPY" != 1 ] && [ "$IN_PLACE" != 1 ]; then
  src="$WORK/src"
  echo "==> DRY_RUN: copying the working tree (git ls-files -co --exclude-standard, plus .gpu_debs) to $src"
  rm -rf "$src"; mkdir -p "$src"
  (
    cd "$REPO"
    { git ls-files -z -co --exclude-standard; if [ -d .gpu_debs ]; then find .gpu_debs -type f -print0; fi; } |
      while IFS= read -r -d '' f; do if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi; done |
      tar --null -T - -cf - | tar -xf - -C "$src"
  )
  echo "    $(du -sh "$src" | cut -f1) copied"
  export GPU_VERIFY_IN_COPY=1 DRY_RUN=1 WORK
  exec bash "$src/scripts/gpu_verify.sh"
fi
cd "$REPO"

START_TS=$(date +%s)
if [ "$DRY_RUN" = 1 ]; then TOTAL_BUDGET="${TOTAL_BUDGET:-3600}"; BUILD_CAP="${BUILD_CAP:-2400}"; CPU_CAP="${CPU_CAP:-1200}"; fi
TOTAL_BUDGET="${TOTAL_BUDGET:-540}"
BUILD_CAP="${BUILD_CAP:-300}"
CPU_CAP="${CPU_CAP:-200}"
GPU_CAP="${GPU_CAP:-300}"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 4)}"
FP32_TARGETS="${FP32_TARGETS:-gpu}"
FP32_MIN="${FP32_MIN:-230}"
STEPS="${STEPS:-build,gpu,bench,fp32,cpu}"
BENCH_TIMEOUT="${BENCH_TIMEOUT:-90}"
BENCH_OVERLAP="${BENCH_OVERLAP:-2}"
SKIP_CPU="${SKIP_CPU:-0}"
if [ "$DRY_RUN" = 1 ]; then
  FORCE_DEBS="${FORCE_DEBS:-1}"
  REQUIRE_GPU="${REQUIRE_GPU:-0}"
  PREFIX="${PREFIX:-$WORK/pracdeps}"
  BUILD_DIR="${BUILD_DIR:-$WORK/build}"
  BUILD_DIR_FP32="${BUILD_DIR_FP32:-$WORK/build-fp32}"
else
  FORCE_DEBS="${FORCE_DEBS:-0}"
  REQUIRE_GPU="${REQUIRE_GPU:-1}"
  PREFIX="${PREFIX:-/opt/pracdeps}"
  BUILD_DIR="${BUILD_DIR:-build}"
  BUILD_DIR_FP32="${BUILD_DIR_FP32:-build-fp32}"
fi
DEBS_DIR="$REPO/.gpu_debs"
LOGDIR="$WORK/logs"
rm -rf "$LOGDIR"; mkdir -p "$LOGDIR"
STEPS_TSV="$LOGDIR/steps.tsv"     # name \t status \t seconds \t note
: >"$STEPS_TSV"
FAILED=0

log()  { printf '\n==> %s\n' "$*"; }
warn() { printf 'WARNING: %s\n' "$*" >&2; }
now()  { date +%s; }
elapsed() { echo $(( $(now) - START_TS )); }
remaining() { echo $(( TOTAL_BUDGET - $(elapsed) )); }
# record NAME STATUS SECONDS NOTE ; STATUS: PASS | FAIL | SKIP | INFO
record() {
  local note="${4:-}"; note="${note//$'\t'/ }"; note="${note//$'\n'/ }"
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$note" >>"$STEPS_TSV"
  if [ "$2" = FAIL ]; then FAILED=1; fi
  PARTIAL=1 write_summary >/dev/null 2>&1 || true  # what is done so far comes back even if the call is killed
}
wanted() { [[ ",$STEPS," == *",$1,"* ]]; }  # wanted STEP: is STEP in STEPS
# step_timeout CAP: seconds a step may take now (CAP, or what is left of the budget minus 20 s for the summary)
step_timeout() {
  local cap=$1 left; left=$(( $(remaining) - 20 ))
  if [ "$left" -lt "$cap" ]; then echo "$left"; else echo "$cap"; fi
}
# run_logged LOG TIMEOUT CMD...: runs CMD with output to LOG (and a short tail on stdout); returns its status
run_logged() {
  local logf=$1 t=$2; shift 2
  local rc=0
  { echo "+ $*"; echo "+ (timeout ${t}s, $(date -u +%FT%TZ))"; } >>"$logf"
  if [ "$t" -lt 1 ]; then echo "TIMEOUT: no time left" >>"$logf"; return 124; fi   # (timeout 0 = no limit)
  timeout --kill-after=10 "$t" "$@" >>"$logf" 2>&1 || rc=$?
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo "TIMEOUT after ${t}s" >>"$logf"; fi
  return "$rc"
}

# ---------------------------------------------------------------------------------------------------------------
# env: what the machine is
# ---------------------------------------------------------------------------------------------------------------
step_env() {
  local t0; t0=$(now)
  local f="$LOGDIR/env.log"
  log "machine (full report: logs/env.log)"
  {
    echo "date: $(date -u +%FT%TZ)   host: $(hostname 2>/dev/null || true)   DRY_RUN=$DRY_RUN"
    echo "kernel: $(uname -srm)   glibc: $(ldd --version 2>/dev/null | head -n 1 | awk '{print $NF}')   (the carried .debs are Debian 12's: glibc >= 2.36 for libarchive13, >= 2.34 for the rest)"
    echo "source: GIT_REV=${GIT_REV:-unset} $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '(no .git here)')"
    [ -r /etc/os-release ] && grep -E '^PRETTY_NAME=' /etc/os-release
    echo "cpus: $(nproc)   memory: $(free -g 2>/dev/null | awk '/^Mem:/{print $2" GiB"}')   disk($REPO): $(df -h "$REPO" 2>/dev/null | awk 'NR==2{print $4" free"}')"
    echo "--- nvidia-smi"
    if command -v nvidia-smi >/dev/null 2>&1; then
      timeout 60 nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv 2>&1 || true
      timeout 60 nvidia-smi 2>&1 || true
    else
      echo "nvidia-smi: not found"
    fi
    echo "--- toolchain"
    for tool in nvcc g++ gcc cmake make ninja ctest python3 dpkg ldconfig readelf; do
      printf '%-9s %s\n' "$tool" "$(command -v "$tool" || echo 'NOT FOUND')"
    done
    command -v nvcc >/dev/null 2>&1 && nvcc --version | tail -n 2
    command -v g++ >/dev/null 2>&1 && g++ --version | head -n 1
    command -v cmake >/dev/null 2>&1 && cmake --version | head -n 1
    command -v make >/dev/null 2>&1 && make --version | head -n 1
    ls -ld /usr/local/cuda* 2>/dev/null || echo "/usr/local/cuda: none"
    echo "--- python"
    if command -v python3 >/dev/null 2>&1; then
      python3 --version 2>&1
      timeout 120 python3 - <<'EOF' 2>&1 || true
import os, sys
print("python3:", sys.executable)
try:
    import nvidia
    for p in nvidia.__path__:
        print("nvidia.__path__:", p)
        for d in sorted(os.listdir(p)):
            sub = os.path.join(p, d)
            if os.path.isdir(sub) and not d.startswith("__"):
                print("   ", d, sorted(x for x in os.listdir(sub) if x in ("include", "lib", "bin")))
except Exception as e:
    print("import nvidia: failed:", e)
try:
    import importlib.metadata as md
    for dist in sorted(md.distributions(), key=lambda d: (d.metadata["Name"] or "").lower()):
        n = (dist.metadata["Name"] or "")
        if n.lower().startswith(("nvidia", "cuda-", "torch", "triton", "cupy")):
            print("pip:", n, dist.version)
except Exception as e:
    print("pip list failed:", e)
try:
    import torch
    print("torch:", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(),
          "available", torch.cuda.is_available())
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        print("torch device 0:", p.name, "cc %d.%d" % (p.major, p.minor), "SMs", p.multi_processor_count,
              "mem %.1f GiB" % (p.total_memory / 2**30))
except Exception as e:
    print("torch: not importable:", e)
EOF
    else
      echo "python3: NOT FOUND (CMake then cannot locate pip nvidia-* wheels)"
    fi
    echo "--- libcuda"
    (ldconfig -p 2>/dev/null | grep -E 'libcuda\.so|libnvidia-ml' ) || echo "libcuda.so.1 not in ldconfig cache"
  } >"$f" 2>&1
  # A short version on stdout
  grep -E '^(date|kernel|source|PRETTY|cpus|nvcc |g\+\+ |cmake |make |python3|torch|nvidia.__path__|name,|NVIDIA|Cuda compilation|Build cuda|pip: (nvidia-cudnn|nvidia-cublas|nvidia-nccl|torch ))' "$f" | head -n 40 || true
  grep -A1 '^name, driver' "$f" || true
  local note=""
  local ngpu; ngpu=$(timeout 30 nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  if [ "${ngpu:-0}" -gt 0 ] 2>/dev/null; then
    note="$(timeout 30 nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>/dev/null | head -n 1)"
    GPU_PRESENT=1
  else
    GPU_PRESENT=0
    note="no GPU visible (nvidia-smi -L)"
  fi
  note="$note; nvcc $(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p' || true)"
  if [ "$GPU_PRESENT" = 1 ] || [ "$DRY_RUN" = 1 ]; then
    record env INFO $(( $(now) - t0 )) "$note"
  else
    record env FAIL $(( $(now) - t0 )) "$note (not a dry run: a GPU was expected)"
  fi
  for tool in nvcc g++ cmake; do
    command -v "$tool" >/dev/null 2>&1 || { record "env:$tool" FAIL 0 "$tool not found on PATH"; warn "$tool not found"; }
  done
}

pick_archs() {
  if [ -n "${CUDA_ARCHS:-}" ]; then echo "$CUDA_ARCHS"; return; fi
  local cc=""
  if [ "${GPU_PRESENT:-0}" = 1 ]; then
    cc=$(timeout 30 nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' ') || cc=""
  fi
  case "$cc" in
    9.0|"") echo "90a-real" ;;                      # H100/H200 (and the dry-run default)
    *.*) echo "${cc%%.*}${cc#*.}-real" ;;           # e.g. 8.0 -> 80-real
    *) echo "90a-real" ;;
  esac
}

# ---------------------------------------------------------------------------------------------------------------
# deps: unpack what the system lacks from .gpu_debs into PREFIX
# ---------------------------------------------------------------------------------------------------------------
INC_ROOTS=(/usr/include /usr/local/include /opt/OpenBLAS/include)
LIB_ROOTS=("/usr/lib/$ARCH_TRIPLET" "/lib/$ARCH_TRIPLET" /usr/lib64 /usr/lib /usr/local/lib /usr/local/lib64 /opt/OpenBLAS/lib)
CMAKE_CFG_ROOTS=(/usr/share/cmake /usr/lib/cmake "/usr/lib/$ARCH_TRIPLET/cmake" /usr/lib64/cmake /usr/local/share/cmake
                 /usr/local/lib/cmake /usr/local/lib64/cmake "/usr/local/lib/$ARCH_TRIPLET/cmake")

have_header() { local h r; for h in "$@"; do for r in "${INC_ROOTS[@]}"; do [ -f "$r/$h" ] && return 0; done; done; return 1; }
have_lib() {
  local l r d
  for l in "$@"; do
    if [[ "$l" == cmake:* ]]; then
      for r in "${CMAKE_CFG_ROOTS[@]}"; do
        for d in "$r/${l#cmake:}"*; do [ -f "$d/${l#cmake:}Config.cmake" ] && return 0; done
      done
    else
      for r in "${LIB_ROOTS[@]}"; do [ -e "$r/$l" ] && return 0; done
    fi
  done
  return 1
}
# deb_file PACKAGE: the .deb of PACKAGE in .gpu_debs (fetch_gpu_debs.sh names it PACKAGE.deb; apt-get download's
# own name PACKAGE_VERSION_ARCH.deb is accepted too)
deb_file() {
  local f; for f in "$DEBS_DIR/$1.deb" "$DEBS_DIR/$1"_*.deb; do [ -f "$f" ] && { echo "$f"; return 0; }; done; return 1
}
# deb_extract DEB DIR: dpkg -x, or (no dpkg on the image) a python ar + tar reader
deb_extract() {
  if command -v dpkg >/dev/null 2>&1; then dpkg -x "$1" "$2"; return; fi
  python3 - "$1" "$2" <<'EOF'
import io, sys, tarfile
deb, dest = sys.argv[1], sys.argv[2]
data = open(deb, "rb").read()
assert data[:8] == b"!<arch>\n", "not an ar archive: " + deb
pos = 8
while pos + 60 <= len(data):
    name = data[pos:pos + 16].decode().strip().rstrip("/")
    size = int(data[pos + 48:pos + 58].decode().strip())
    body = data[pos + 60:pos + 60 + size]
    pos += 60 + size + (size & 1)
    if name.startswith("data.tar"):
        with tarfile.open(fileobj=io.BytesIO(body), mode="r:*") as t:
            if hasattr(tarfile, "data_filter"):
                t.extractall(dest, filter="tar")
            else:
                t.extractall(dest)
        sys.exit(0)
sys.exit("no data.tar member in " + deb)
EOF
}
# usr_merge DIR: move DIR/lib into DIR/usr/lib (bookworm .debs still put some libraries in /lib) and point the
# absolute symlinks that .debs carry (libz.so -> /lib/x86_64-linux-gnu/libz.so.1.2.13) into DIR.
usr_merge() {
  local d=$1 l t
  if [ -d "$d/lib" ] && [ ! -L "$d/lib" ]; then
    mkdir -p "${d:?}/usr/lib"; cp -a "${d:?}/lib/." "${d:?}/usr/lib/"; rm -rf "${d:?}/lib"; ln -s usr/lib "${d:?}/lib"
  fi
  while IFS= read -r -d '' l; do
    t=$(readlink "$l")
    case "$t" in /*) if [ -e "$d$t" ]; then ln -sfn "$d$t" "$l"; fi ;; esac
  done < <(find "$d" -type l -print0)
}
# soname_of FILE
soname_of() {
  local s=""
  command -v readelf >/dev/null 2>&1 && s=$(readelf -d "$1" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p' | head -n 1)
  [ -n "$s" ] && echo "$s" || basename "$1"
}
LDCACHE=""   # the sonames in ld.so's cache, read once (no `| grep -q`: with pipefail its early exit can fail the pipe)
system_has_soname() {
  if [ -z "$LDCACHE" ] && command -v ldconfig >/dev/null 2>&1; then
    LDCACHE=$(ldconfig -p 2>/dev/null | awk 'NR>1{print $1}' || true)
  fi
  if [ -n "$LDCACHE" ] && grep -qxF "$1" <<<"$LDCACHE"; then return 0; fi
  local r; for r in "${LIB_ROOTS[@]}"; do [ -e "$r/$1" ] && return 0; done
  return 1
}

DEPS_TABLE=()   # "group|how"
step_deps() {
  local t0; t0=$(now)
  local f="$LOGDIR/deps.log" status=PASS notes=()
  log "dependencies (PREFIX=$PREFIX, FORCE_DEBS=$FORCE_DEBS; details: logs/deps.log)"
  : >"$f"
  case "$PREFIX" in
    /*/*) ;;
    *) record deps FAIL 0 "PREFIX=$PREFIX refused: give a private folder such as /opt/pracdeps"; return 1 ;;
  esac
  case "$PREFIX" in /usr|/usr/*|/lib*|/bin*|/etc*|/opt|/tmp|/root) record deps FAIL 0 "PREFIX=$PREFIX refused (system folder)"; return 1 ;; esac
  # a later call on the warm machine (CLEAN=0: gpu_followup.sh's fp32 job) reuses what an earlier call unpacked:
  # unpacking again gave the frontend's headers new times (an incremental build then recompiled what includes them)
  # and, where that call carried no .gpu_debs, removed the libraries the builds link
  if [ "${CLEAN:-1}" = 0 ] && [ -f "$PREFIX/env.sh" ]; then
    # shellcheck disable=SC1091
    . "$PREFIX/env.sh"
    { echo "reused $PREFIX (CLEAN=0):"; cat "$PREFIX/env.sh"; } >>"$f"
    record deps PASS $(( $(now) - t0 )) "reused $PREFIX, unpacked by an earlier call (CLEAN=0)"
    return 0
  fi
  rm -rf "${PREFIX:?}"; mkdir -p "$PREFIX/lib"
  local cpp="" g name pkgs hdrs libs p deb missing_debs
  for g in "${DEP_GROUPS[@]}"; do
    IFS='|' read -r name pkgs hdrs libs <<<"$g"
    # shellcheck disable=SC2086
    if [ "$FORCE_DEBS" != 1 ] && have_header $hdrs && have_lib $libs; then
      DEPS_TABLE+=("$name|system"); echo "$name: found on the system" >>"$f"; continue
    fi
    missing_debs=""
    for p in $pkgs; do deb_file "$p" >/dev/null || missing_debs="$missing_debs $p"; done
    if [ -n "$missing_debs" ]; then
      DEPS_TABLE+=("$name|MISSING: not on the system and no .deb for$missing_debs")
      echo "$name: MISSING (system lacks it; .gpu_debs lacks$missing_debs) -> run scripts/fetch_gpu_debs.sh on the dev machine and carry .gpu_debs" | tee -a "$f"
      status=FAIL; notes+=("$name missing"); continue
    fi
    mkdir -p "$PREFIX/$name"
    for p in $pkgs; do
      deb=$(deb_file "$p")
      if ! deb_extract "$deb" "$PREFIX/$name" >>"$f" 2>&1; then
        echo "$name: extracting $deb FAILED" | tee -a "$f"; status=FAIL; notes+=("$name: extract failed")
      fi
    done
    usr_merge "$PREFIX/$name"
    cpp="${cpp:+$cpp:}$PREFIX/$name/usr"
    DEPS_TABLE+=("$name|carried: $PREFIX/$name/usr ($pkgs)")
    echo "$name: unpacked $pkgs into $PREFIX/$name" >>"$f"
  done
  # runtime-only packages (always unpacked; linked below only where the system lacks the soname)
  mkdir -p "$PREFIX/runtime"
  for p in $RUNTIME_PKGS; do
    if deb=$(deb_file "$p"); then deb_extract "$deb" "$PREFIX/runtime" >>"$f" 2>&1 || echo "runtime: extracting $deb FAILED" >>"$f"
    else echo "runtime: no .deb for $p" >>"$f"; fi
  done
  usr_merge "$PREFIX/runtime"
  # shared libraries the system lacks -> PREFIX/lib (one folder on LD_LIBRARY_PATH, for the linker's search of
  # the libraries' own DT_NEEDED entries and for running the tests)
  local so sn linked=()
  while IFS= read -r -d '' so; do
    sn=$(soname_of "$so")
    [ -e "$PREFIX/lib/$sn" ] && continue
    if [ "$FORCE_DEBS" = 1 ] || ! system_has_soname "$sn"; then
      ln -sfn "$so" "$PREFIX/lib/$sn"; linked+=("$sn")
    fi
  done < <(find "$PREFIX" -path "$PREFIX/lib" -prune -o -type f -name 'lib*.so*' -print0 2>/dev/null | sort -z)
  echo "linked into $PREFIX/lib: ${linked[*]:-none}" >>"$f"
  if [ -n "$cpp" ]; then export CMAKE_PREFIX_PATH="$cpp${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"; fi
  if [ "${#linked[@]}" -gt 0 ]; then export LD_LIBRARY_PATH="$PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi

  # cudnn-frontend (header-only): python's nvidia-cudnn-frontend, else the carried zip/wheel
  local fe_sys=""
  if [ "$FORCE_DEBS" != 1 ]; then
    fe_sys=$(python3 -c 'import importlib.metadata as m
for f in (m.files("nvidia-cudnn-frontend") or []):
    if f.name == "cudnn_frontend.h": print(f.locate().parent); break' 2>/dev/null || true)
    [ -z "$fe_sys" ] && [ -f /usr/include/cudnn_frontend.h ] && fe_sys=/usr/include
  fi
  if [ -n "$fe_sys" ]; then
    DEPS_TABLE+=("cudnn_frontend|system: $fe_sys")
  else
    local z=""
    for z in "$DEBS_DIR"/*cudnn_frontend*.zip "$DEBS_DIR"/nvidia_cudnn_frontend*.whl; do [ -f "$z" ] && break; z=""; done
    if [ -n "$z" ]; then
      rm -rf "$PREFIX/cudnn_frontend"; mkdir -p "$PREFIX/cudnn_frontend"
      python3 -m zipfile -e "$z" "$PREFIX/cudnn_frontend" >>"$f" 2>&1 || unzip -q -o "$z" -d "$PREFIX/cudnn_frontend" >>"$f" 2>&1 || true
      if [ -f "$PREFIX/cudnn_frontend/include/cudnn_frontend.h" ]; then
        export CUDNN_FRONTEND_PATH="$PREFIX/cudnn_frontend"
        DEPS_TABLE+=("cudnn_frontend|carried: $CUDNN_FRONTEND_PATH ($(basename "$z"))")
      else
        DEPS_TABLE+=("cudnn_frontend|MISSING: $(basename "$z") has no include/cudnn_frontend.h")
        notes+=("cudnn-frontend unusable")
      fi
    else
      DEPS_TABLE+=("cudnn_frontend|MISSING (optional): no pip nvidia-cudnn-frontend and no zip in .gpu_debs")
      notes+=("no cudnn-frontend (optional)")
    fi
  fi
  {
    echo "CMAKE_PREFIX_PATH=${CMAKE_PREFIX_PATH:-}"
    echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
    echo "CUDNN_FRONTEND_PATH=${CUDNN_FRONTEND_PATH:-}"
  } >>"$f"
  local row; for row in "${DEPS_TABLE[@]}"; do printf '  %-15s %s\n' "${row%%|*}" "${row#*|}"; done
  echo "  CMAKE_PREFIX_PATH=${CMAKE_PREFIX_PATH:-}"
  echo "  LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  local n_carried=0; for row in "${DEPS_TABLE[@]}"; do [[ "$row" == *"|carried"* ]] && n_carried=$((n_carried+1)); done
  if [ "$status" = PASS ]; then  # what a later call with CLEAN=0 reuses (above)
    {
      printf 'export CMAKE_PREFIX_PATH=%q\n' "${CMAKE_PREFIX_PATH:-}"
      printf 'export LD_LIBRARY_PATH=%q\n' "${LD_LIBRARY_PATH:-}"
      [ -n "${CUDNN_FRONTEND_PATH:-}" ] && printf 'export CUDNN_FRONTEND_PATH=%q\n' "$CUDNN_FRONTEND_PATH"
    } >"$PREFIX/env.sh"
  fi
  record deps "$status" $(( $(now) - t0 )) "$n_carried carried from .gpu_debs${notes:+; ${notes[*]}}"
}

# ---------------------------------------------------------------------------------------------------------------
# build
# ---------------------------------------------------------------------------------------------------------------
# make drives cmake as the README says; without make (not promised on the GPU image) cmake is called with the
# same arguments and the Ninja generator. USE_MAKE=0 forces that path (to test it).
HAVE_MAKE=0; command -v make >/dev/null 2>&1 && HAVE_MAKE=1
[ "${USE_MAKE:-1}" = 0 ] && HAVE_MAKE=0
# configure BUILD_DIR PRECISION LOG TIMEOUT. PRAC_EMU=OFF: the emulated builds (kernels/cuda_emu) are for machines
# without a GPU; here the real one runs the same tests.
configure_dir() {
  local bd=$1 prec=$2 logf=$3 t=$4
  local at_root=ON; [ "$prec" = BF16 ] || at_root=OFF  # ./train_gpt2 etc. are the BF16 build's
  if [ "$HAVE_MAKE" = 1 ]; then
    # INSTALL_DEPS=0: the Makefile would otherwise run scripts/install_deps.sh, whose apt-get has no network there
    # (seen 2026-11-27: "Unable to locate package cmake"); step_deps has put what the build needs in place
    run_logged "$logf" "$t" make configure INSTALL_DEPS=0 BUILD_DIR="$bd" PRAC_CUDA=ON CUDA_ARCHS="$ARCHS" \
      PRECISION="$prec" CMAKE_ARGS="-DPRAC_EMU=OFF -DPRAC_TRAINERS_AT_ROOT=$at_root"
  else
    local gen=()
    if [ ! -f "$bd/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then gen=(-G Ninja); fi
    run_logged "$logf" "$t" cmake -S . -B "$bd" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DPRAC_CUDA=ON -DPRAC_EMU=OFF \
      "-DPRAC_CUDA_ARCHS=$ARCHS" "-DPRAC_PRECISION=$prec" "-DPRAC_TRAINERS_AT_ROOT=$at_root" ${CUDNN_FRONTEND_PATH:+"-DCUDNN_FRONTEND_PATH=$CUDNN_FRONTEND_PATH"}
  fi
}
# build_dir BUILD_DIR LOG TIMEOUT [TARGETS...]: build (a failed build goes on with -k, so that whatever compiles
# can still be tested)
build_dir() {
  local bd=$1 logf=$2 t=$3; shift 3
  local tg=(); [ $# -gt 0 ] && tg=(--target "$@")
  local t0 rc=0; t0=$(now)
  MAKEFLAGS='' run_logged "$logf" "$t" cmake --build "$bd" -j"$JOBS" "${tg[@]}" || rc=$?
  if [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$rc" != 137 ]; then
    local t2; t2=$(step_timeout $(( t - ($(now) - t0) )))
    if [ "$t2" -gt 30 ]; then
      local keep=(-- -k); [ -f "$bd/build.ninja" ] && keep=(-- -k 0)
      echo "==== build failed (rc=$rc); building the rest with -k" >>"$logf"
      MAKEFLAGS='' run_logged "$logf" "$t2" cmake --build "$bd" -j"$JOBS" "${tg[@]}" "${keep[@]}" || true
    fi
  fi
  return "$rc"
}
deps_report_from() {  # the "✓/✗ NAME: ..." lines of a configure log
  grep -E '^-- +(✓|✗) ' "$1" | sed 's/^-- *//' || true
}
errors_from() {  # the first compiler/linker errors of a build log
  grep -E 'error|Error [0-9]|undefined reference|No such file' "$1" | grep -vE '^\+ |-Werror|error_code|errors?\.(h|cpp|cu)' | head -n "${2:-8}" || true
}

step_build() {  # NAME BUILD_DIR PRECISION TARGETS(all|gpu)
  local name=$1 bd=$2 prec=$3 what=$4
  local logf="$LOGDIR/$name.log" t0 rc=0 t; t0=$(now)
  log "$name: configure + build ($prec, archs $ARCHS, $bd, targets: $what; log: logs/$name.log)"
  t=$(step_timeout "$BUILD_CAP")
  if [ "$t" -lt 30 ]; then record "$name" SKIP 0 "no time left"; return 1; fi
  if [ "${CLEAN:-1}" = 1 ]; then rm -rf "$bd"; fi
  if ! configure_dir "$bd" "$prec" "$logf" "$t"; then
    deps_report_from "$logf" | sed 's/^/  /'
    echo "  configure FAILED:"
    if grep -q 'CMake Error' "$logf"; then grep -A 6 'CMake Error' "$logf" | head -n 30 | sed 's/^/  | /'
    else tail -n 20 "$logf" | sed 's/^/  | /'; fi
    local first; first=$(grep -m1 -A3 'CMake Error' "$logf" | grep -v '^ *$' | tr -s ' ' | tr '\n' ' ' | cut -c1-200 || true)
    record "$name" FAIL $(( $(now) - t0 )) "configure failed: ${first:-$(tail -n 1 "$logf")}"
    return 1
  fi
  deps_report_from "$logf" | sed 's/^/  /'
  local targets=()
  if [ "$what" = gpu ]; then
    # the executables of the tests labelled gpu, by name (test/gpu/CMakeLists.txt: prac_gpu_test names the
    # executable after its target). Before a build ctest's JSON has no command, so the add_test() lines of the
    # generated CTestTestfile.cmake files give the executable.
    mapfile -t targets < <(ctest --test-dir "$bd" -N -L gpu --show-only=json-v1 2>/dev/null | python3 -c '
import json, os, re, sys
try:
    names = [t["name"] for t in json.load(sys.stdin).get("tests", [])]
except Exception:
    sys.exit(0)
exe = {}
for root, _, files in os.walk(sys.argv[1]):
    if "CTestTestfile.cmake" in files:
        # CMake 3.x writes add_test([=[NAME]=] "EXE" ...), CMake 4.x add_test("NAME" "EXE" ...)
        for m in re.finditer(r"add_test\((?:\[=\[(.*?)\]=\]|\"([^\"]*)\") \"([^\"]+)\"", open(os.path.join(root, "CTestTestfile.cmake")).read()):
            exe[m.group(1) or m.group(2)] = os.path.basename(m.group(3))
seen = set()
for n in names:
    t = exe.get(n)
    if t and t not in seen:
        seen.add(t); print(t)' "$bd" || true)
    if [ "${#targets[@]}" = 0 ]; then
      record "$name" FAIL $(( $(now) - t0 )) "no tests labelled gpu after configure (is PRAC_HAVE_CUDA on?)"
      return 1
    fi
  fi
  t=$(step_timeout $(( BUILD_CAP - ($(now) - t0) )))
  build_dir "$bd" "$logf" "$t" "${targets[@]}" || rc=$?
  local secs=$(( $(now) - t0 ))
  if [ "$rc" = 0 ]; then
    record "$name" PASS "$secs" "$(grep -c -E '^\[ *[0-9]+(%|/[0-9]+)\] (Building|Linking)' "$logf" || true) build steps${targets:+; targets ${targets[*]}}"
  else
    local why="rc=$rc"; { [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && why="timed out"
    echo "  build FAILED ($why); first errors:"; errors_from "$logf" 12 | sed 's/^/  | /'
    record "$name" FAIL "$secs" "$why: $(errors_from "$logf" 1)"
  fi
  return "$rc"
}

# ---------------------------------------------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------------------------------------------
# step_ctest NAME BUILD_DIR CAP_SECONDS CTEST_ARGS...: runs ctest with JUnit output, records the step
step_ctest() {
  local name=$1 bd=$2 cap=$3; shift 3
  local logf="$LOGDIR/$name.log" junit="$LOGDIR/$name.junit.xml" t0 rc=0 t; t0=$(now)
  t=$(step_timeout "$cap")
  log "$name: ctest --test-dir $bd $* (REQUIRE_GPU=${RG:-unset}; log: logs/$name.log)"
  if [ ! -f "$bd/CTestTestfile.cmake" ]; then record "$name" FAIL 0 "$bd is not configured"; return 1; fi
  if [ "$t" -lt 15 ]; then record "$name" SKIP 0 "no time left"; return 1; fi
  local envs=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1)
  [ -n "${RG:-}" ] && envs+=(REQUIRE_GPU="$RG")
  run_logged "$logf" "$t" env "${envs[@]}" ctest --test-dir "$bd" --output-on-failure --output-junit "$junit" "$@" || rc=$?
  local counts; counts=$(grep -E 'tests passed|tests failed' "$logf" | tail -n 1 || true)
  if [ -z "$counts" ]; then   # killed before ctest's own summary: count what the log shows
    local done_n total_n bad
    done_n=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#' "$logf" || true)
    total_n=$(grep -m1 -oE '^ *[0-9]+/[0-9]+ Test' "$logf" | sed -E 's/.*\/([0-9]+) Test/\1/' || true)
    bad=$(grep -E '^ *[0-9]+/[0-9]+ Test +#.*\*\*\*' "$logf" | sed -E 's/.*Test +#[0-9]+: ([^ ]+).*/\1/' | tr '\n' ' ' || true)
    counts="$done_n/${total_n:-?} tests finished; not passed: ${bad:-none}"
  fi
  local lines; lines=$(grep -E '^ *[0-9]+/[0-9]+ Test +#' "$logf" || true)
  if [ "$(printf '%s\n' "$lines" | grep -c .)" -le 40 ]; then printf '%s\n' "$lines" | sed '/^$/d; s/^/  /'
  else printf '%s\n' "$lines" | grep -v ' Passed ' | sed 's/^/  /' | head -n 40; fi
  [ -n "$counts" ] && echo "  $counts"
  if [ "$rc" = 0 ] && grep -q 'No tests were found' "$logf"; then
    record "$name" FAIL $(( $(now) - t0 )) "no tests found"; return 1
  fi
  if [ "$rc" = 0 ]; then
    record "$name" PASS $(( $(now) - t0 )) "$counts"
  else
    local why="$counts"; { [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && why="timed out after ${t}s; $counts"
    grep -A 30 'The following tests FAILED' "$logf" | sed 's/^/  /' | head -n 30
    record "$name" FAIL $(( $(now) - t0 )) "$why"
  fi
  return "$rc"
}

# ---------------------------------------------------------------------------------------------------------------
# Benchmarks hook. Runs every executable named bench_gpu* in $BUILD_DIR/tools (tools/bench_gpu.cu; a build without
# the CUDA backend has none) with a time limit of BENCH_TIMEOUT seconds each, and records its status; its
# output goes to logs/bench_<name>.log and its last lines to stdout. A GPU benchmark that wants its numbers in
# the summary should print lines starting with "RESULT " (they are copied into summary.txt and results.json).
# ---------------------------------------------------------------------------------------------------------------
# One benchmark run: NAME (its log logs/bench_NAME.log, its summary row bench:NAME), then the command.
bench_once() {
  local n=$1 t0 t rc=0; shift
  t0=$(now); t=$(step_timeout "$BENCH_TIMEOUT")
  if [ "$t" -lt 10 ]; then record "bench:$n" SKIP 0 "no time left"; return 0; fi
  run_logged "$LOGDIR/bench_$n.log" "$t" "$@" || rc=$?
  tail -n 15 "$LOGDIR/bench_$n.log" | sed 's/^/  | /'
  grep -E '^RESULT ' "$LOGDIR/bench_$n.log" >>"$LOGDIR/bench_results.txt" || true
  if [ "$rc" = 0 ]; then record "bench:$n" PASS $(( $(now) - t0 )) "$(grep -c '^RESULT ' "$LOGDIR/bench_$n.log" || true) RESULT lines"
  else record "bench:$n" FAIL $(( $(now) - t0 )) "rc=$rc$([ "$rc" = 124 ] && echo " (timed out after ${t}s)")"; fi
}
run_benchmarks() {
  local bd=$1 b found=0
  log "benchmarks: $bd/tools/bench_gpu*"
  for b in "$bd"/tools/bench_gpu*; do
    [ -f "$b" ] && [ -x "$b" ] || continue
    found=1
    # shellcheck disable=SC2086  # BENCH_ARGS is a list of words
    bench_once "$(basename "$b")" "$b" ${BENCH_ARGS-"--quick"}
  done
  if [ "$found" = 0 ]; then
    echo "  none (no tools/bench_gpu* program in this build)"
    record bench SKIP 0 "no bench_gpu* executables in $bd/tools"
  fi
  # issue #15's staggered refresh steps with the solve overlapped (--prac-refresh-overlap D), beside bench_gpu
  # --quick's in-place ones, on the model where one site-layer's refresh is the largest part of a step
  if [ "$BENCH_OVERLAP" != 0 ] && [ -x "$bd/tools/bench_gpu" ]; then
    bench_once "bench_gpu_overlap$BENCH_OVERLAP" "$bd/tools/bench_gpu" --quick --models llama-130m --no-max-batch \
      --refresh-overlap "$BENCH_OVERLAP"
  fi
}

# ---------------------------------------------------------------------------------------------------------------
# summary: table on stdout, summary.txt, results.json, logs.tar.gz
# ---------------------------------------------------------------------------------------------------------------
write_summary() {
  local dest=${OUT:-$WORK/results}
  mkdir -p "$dest"
  local py_ok=0; command -v python3 >/dev/null 2>&1 && py_ok=1
  if [ "$py_ok" = 1 ]; then
    DRY_RUN="$DRY_RUN" ARCHS="${ARCHS:-}" PARTIAL="${PARTIAL:-0}" python3 - "$LOGDIR" "$dest" <<'EOF' || FAILED=1
import glob, json, os, sys, time
import xml.etree.ElementTree as ET
logdir, dest = sys.argv[1], sys.argv[2]
steps = []
for line in open(os.path.join(logdir, "steps.tsv")):
    p = line.rstrip("\n").split("\t")
    if len(p) >= 3:
        steps.append({"name": p[0], "status": p[1], "seconds": float(p[2]), "note": p[3] if len(p) > 3 else ""})
suites = {}
for j in sorted(glob.glob(os.path.join(logdir, "*.junit.xml"))):
    suite = os.path.basename(j)[: -len(".junit.xml")]
    tests = []
    try:
        root = ET.parse(j).getroot()
    except Exception as e:
        suites[suite] = [{"name": "(junit unreadable)", "status": "FAIL", "seconds": 0, "detail": str(e)}]
        continue
    for tc in root.iter("testcase"):
        st = "PASS"
        so = tc.find("system-out")
        out_lines = [l.strip() for l in ((so.text if so is not None else "") or "").splitlines() if l.strip()]
        detail = out_lines[-1][:200] if out_lines else ""
        if tc.find("failure") is not None or tc.find("error") is not None:
            st = "FAIL"
            f = tc.find("failure") if tc.find("failure") is not None else tc.find("error")
            bad = [l for l in out_lines if any(k in l for k in ("FAIL", "error", "Error", "Failure", "mismatch", "exception"))]
            detail = ((f.get("message") or "") or (bad[0] if bad else detail))[:200]
        elif tc.find("skipped") is not None or tc.get("status") in ("notrun", "disabled"):
            s = tc.find("skipped")
            detail = ((s.get("message") if s is not None else "") or tc.get("status") or "")[:200]
            # a skip is the test's own exit code 77 (or a disabled test); "Unable to find executable" is a failure
            st = "SKIP" if ("SKIP_RETURN_CODE" in detail or "SKIP_REGULAR_EXPRESSION" in detail
                            or tc.get("status") == "disabled") else "FAIL"
        t = {"name": tc.get("name"), "status": st, "seconds": float(tc.get("time") or 0), "detail": detail}
        if st != "PASS" or len(out_lines) <= 60:
            t["output_tail"] = "\n".join(out_lines[-60:])
        tests.append(t)
    suites[suite] = tests
bench = []
bp = os.path.join(logdir, "bench_results.txt")
if os.path.exists(bp):
    bench = [l.rstrip("\n") for l in open(bp)]
dry = os.environ.get("DRY_RUN") == "1"
skipped = [s["name"] for s in steps if s["status"] == "SKIP"]
# outside a dry run the BF16 build and its GPU tests are what the call is for: skipped (no time left), they did not pass
ok = (all(s["status"] != "FAIL" for s in steps) and all(t["status"] != "FAIL" for ts in suites.values() for t in ts)
      and (dry or not any(n in ("build", "gpu") for n in skipped)))
res = {"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "dry_run": os.environ.get("DRY_RUN") == "1",
       "git_rev": os.environ.get("GIT_REV", ""), "cuda_archs": os.environ.get("ARCHS"), "ok": ok, "steps": steps,
       "tests": suites, "bench": bench}
json.dump(res, open(os.path.join(dest, "results.json.tmp"), "w"), indent=1)
os.replace(os.path.join(dest, "results.json.tmp"), os.path.join(dest, "results.json"))

out = []
W = 58
out.append("gpu_verify %s  GIT_REV=%s  archs=%s%s" % (res["date_utc"], res["git_rev"] or "unset", res["cuda_archs"],
                                                   "  DRY_RUN" if res["dry_run"] else ""))
out.append("%-*s %-6s %8s  %s" % (W, "step / test", "status", "seconds", "note"))
out.append("-" * 110)
for s in steps:
    out.append("%-*s %-6s %8.1f  %s" % (W, s["name"], s["status"], s["seconds"], s["note"][:160]))
    ts = suites.get(s["name"], [])
    if not ts:
        continue
    # GPU suites: every test; big suites: failures, skips and the slowest
    if len(ts) <= 40:
        show = ts
    else:
        show = [t for t in ts if t["status"] != "PASS"] + sorted([t for t in ts if t["status"] == "PASS"], key=lambda t: -t["seconds"])[:5]
        n = {k: sum(1 for t in ts if t["status"] == k) for k in ("PASS", "FAIL", "SKIP")}
        out.append("  %-*s %-6s %8s  %d passed, %d failed, %d skipped; listed: non-passing + 5 slowest" % (W - 2, "(%d tests)" % len(ts), "", "", n["PASS"], n["FAIL"], n["SKIP"]))
    for t in show:
        out.append("  %-*s %-6s %8.2f  %s" % (W - 2, t["name"][: W - 2], t["status"], t["seconds"], t["detail"][:100]))
for b in bench:
    out.append("  " + b)
out.append("-" * 110)
if os.environ.get("PARTIAL") == "1":  # rewritten after each step: a killed call leaves this line
    out.append("RESULT: INCOMPLETE (written after step %s; the script did not finish)" % (steps[-1]["name"] if steps else "-"))
else:
    out.append("RESULT: %s%s" % ("OK" if ok else "FAILED", " (dry run: no GPU; skips allowed)" if dry else
                                 " (skipped: %s)" % ", ".join(skipped) if skipped else ""))
txt = "\n".join(out) + "\n"
open(os.path.join(dest, "summary.txt.tmp"), "w").write(txt)  # (renamed whole: a call killed mid-write keeps the last)
os.replace(os.path.join(dest, "summary.txt.tmp"), os.path.join(dest, "summary.txt"))
print(txt, end="")
sys.exit(0 if ok else 1)
EOF
  else
    { echo "python3 missing: raw step list"; cat "$STEPS_TSV"; } | tee "$dest/summary.txt"
  fi
  cp "$LOGDIR/deps.log" "$dest/deps.txt" 2>/dev/null || true
  { tar -C "$WORK" -czf "$dest/logs.tar.gz.tmp" logs 2>/dev/null && mv "$dest/logs.tar.gz.tmp" "$dest/logs.tar.gz"; } \
    || warn "could not write $dest/logs.tar.gz"
  echo "results: $dest/{summary.txt,results.json,deps.txt,logs.tar.gz}  (elapsed $(elapsed)s of ${TOTAL_BUDGET}s)"
}

# ---------------------------------------------------------------------------------------------------------------
main() {
  log "scripts/gpu_verify.sh in $REPO (DRY_RUN=$DRY_RUN, budget ${TOTAL_BUDGET}s, jobs $JOBS)"
  GPU_PRESENT=0
  step_env || true
  # no GPU and no DRY_RUN: stop here (the build step would build into $BUILD_DIR of this checkout, the root binaries
  # with it, which a dry run's copy keeps apart; it carried on and said so only at the end)
  if [ "$DRY_RUN" != 1 ] && [ "${GPU_PRESENT:-0}" != 1 ]; then
    echo "STOP: no GPU is visible (nvidia-smi -L) and this is no dry run: nothing is built or run in $REPO;"
    echo "      on a GPU-less machine run DRY_RUN=1 bash scripts/gpu_verify.sh (it works in a copy under WORK)"
    write_summary || true
    exit 1
  fi
  ARCHS=$(pick_archs)
  echo "  CUDA archs: $ARCHS"
  step_deps || true

  if wanted build; then step_build build "$BUILD_DIR" BF16 all || true; fi
  # every GPU test's whole output goes into the JUnit file (ctest keeps 1 KiB of a passed test's by default): its
  # measured figures (cuSOLVER's workspace, timings, ulp counts) are what the log entry needs
  local GPU_OUTPUT=(-V --test-output-size-passed 1048576 --test-output-size-failed 1048576)
  if wanted gpu; then
    RG="$REQUIRE_GPU" step_ctest gpu "$BUILD_DIR" "$GPU_CAP" -L gpu --timeout 180 "${GPU_OUTPUT[@]}" || true
  fi

  # the benchmarks before the FP32 build: the BF16 build's numbers (issue #15's staggered steps) are what a session
  # with one GPU call most needs, and the FP32 GPU tests passed on the last GPU (docs/VERIFICATION.md)
  if wanted bench; then run_benchmarks "$BUILD_DIR" || true; fi

  if [ "$FP32_TARGETS" != none ] && wanted fp32; then
    if [ "$(remaining)" -lt "$FP32_MIN" ]; then  # a skip, not a failure: nothing of the FP32 build was tried
      local why="$(remaining) s left, FP32_MIN=$FP32_MIN: run scripts/gpu_followup.sh fp32 on the warm machine"
      record build-fp32 SKIP 0 "$why"; record gpu-fp32 SKIP 0 "$why"
    else
      if step_build build-fp32 "$BUILD_DIR_FP32" FP32 "$FP32_TARGETS"; then :; fi
      RG="$REQUIRE_GPU" step_ctest gpu-fp32 "$BUILD_DIR_FP32" "$GPU_CAP" -L gpu --timeout 180 "${GPU_OUTPUT[@]}" || true
    fi
  fi

  if [ "$SKIP_CPU" != 1 ] && wanted cpu; then
    RG="" step_ctest cpu "$BUILD_DIR" "$CPU_CAP" -LE gpu -j "$JOBS" --timeout 150 || true
  fi

  log "summary (elapsed $(elapsed)s)"
  write_summary || FAILED=1
  exit "$FAILED"
}
main
