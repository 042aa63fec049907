#!/usr/bin/env bash
# Installs what building and testing this project needs on Debian/Ubuntu, without a prompt: the apt packages
# (compilers, cmake, OpenBLAS+LAPACKE, MPI, PCRE2, SentencePiece, nlohmann_json, GoogleTest; clang and Boost.Context
# for the emulated CUDA build) and the pip packages (tiktoken, transformers, sentencepiece and protobuf (transformers'
# conversion of a SentencePiece model) and matplotlib for tests, the cuDNN frontend's headers).
# Fast when nothing is missing (one dpkg-query, one python3 call; no network): `make` runs it before configuring,
# and so does .ci/run. Usage: scripts/install_deps.sh [--check]
#   --check   install nothing; list what is missing and exit 1 if anything is (the CI check after .ci/run)
# Without root it uses `sudo -n`, and fails with a clear message when that cannot run. INSTALL_DEPS=0 skips it in make.
set -euo pipefail

APT_PKGS=(
  build-essential cmake make g++ pkg-config python3 python3-pip
  libopenblas-dev libopenblas-openmp-dev liblapacke-dev
  libomp-dev
  libpcre2-dev
  libopenmpi-dev openmpi-bin
  nlohmann-json3-dev
  libsentencepiece-dev sentencepiece
  libarchive-dev zlib1g-dev liblzma-dev libzstd-dev
  libgtest-dev googletest
  clang libboost-context-dev  # (it brings libboost1.74-dev: Boost.Math, prac_analyze's Student t quantile)
)
# (tests only: INSTALL_DEPS_EXTRA_APT names packages to require as well, e.g. one that does not exist)
read -r -a extra <<<"${INSTALL_DEPS_EXTRA_APT:-}"
APT_PKGS+=("${extra[@]}")
# pip distributions; optional for the build (a failed install is a warning): the tests that need them say so
PIP_PKGS=(tiktoken transformers sentencepiece protobuf matplotlib nvidia-cudnn-frontend)  # transformers: its tokenizers need no torch

check_only=0
case "${1:-}" in
  --check) check_only=1 ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac
me="scripts/install_deps.sh"

# the PIP_PKGS that python3 does not have (one python3 start, no network)
pip_missing() {
  python3 -c 'import sys
from importlib import metadata
for name in sys.argv[1:]:
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        print(name)' "${PIP_PKGS[@]}"
}

# ---- what is missing ----------------------------------------------------------------------------------------------
missing_apt=()
if command -v dpkg-query >/dev/null 2>&1; then
  # (dpkg-query exits 1 when it knows a package not at all: that one is missing, like the others it does not list)
  installed=$({ dpkg-query -W -f='${Package} ${Status}\n' "${APT_PKGS[@]}" 2>/dev/null || true; } |
              awk '/ install ok installed$/ {print $1}')
  for p in "${APT_PKGS[@]}"; do
    grep -qx "$p" <<<"$installed" || missing_apt+=("$p")
  done
else
  missing_apt=(dpkg-query)  # not Debian: nothing this script can check or install
fi
missing_pip=()
if command -v python3 >/dev/null 2>&1; then
  mapfile -t missing_pip < <(pip_missing)
else
  missing_pip=("${PIP_PKGS[@]}")
fi

if [ "$check_only" = 1 ]; then
  if [ "${#missing_apt[@]}" -eq 0 ] && [ "${#missing_pip[@]}" -eq 0 ]; then
    echo "$me: nothing missing (${#APT_PKGS[@]} apt and ${#PIP_PKGS[@]} pip packages installed)"
    exit 0
  fi
  [ "${#missing_apt[@]}" -gt 0 ] && echo "$me: missing apt packages: ${missing_apt[*]}"
  [ "${#missing_pip[@]}" -gt 0 ] && echo "$me: missing pip packages: ${missing_pip[*]}"
  exit 1
fi
[ "${#missing_apt[@]}" -eq 0 ] && [ "${#missing_pip[@]}" -eq 0 ] && exit 0

# ---- apt ----------------------------------------------------------------------------------------------------------
if [ "${#missing_apt[@]}" -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-query >/dev/null 2>&1; then
    echo "$me: error: this is not a Debian/Ubuntu system (no apt-get/dpkg-query); install the equivalents of:" \
         "${APT_PKGS[*]}; then run make with INSTALL_DEPS=0" >&2
    exit 1
  fi
  SUDO=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
      SUDO=(sudo -n)
    else
      echo "$me: error: the build needs ${missing_apt[*]}, and installing them needs root (this user is not root" \
           "and sudo -n cannot run without a password)" >&2
      echo "---> HINT: run: sudo apt-get install -y ${missing_apt[*]}   (or sudo $me), then make again" >&2
      exit 1
    fi
  fi
  echo "$me: apt-get install ${missing_apt[*]} (to build and test: compilers, BLAS/LAPACK, MPI, tokenizer and test libraries)"
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -q </dev/null >/dev/null || { sleep 10; "${SUDO[@]}" apt-get update -q </dev/null >/dev/null; }
  "${SUDO[@]}" apt-get install -y -q "${missing_apt[@]}" </dev/null
fi

# ---- pip (optional: a failure is a warning) -----------------------------------------------------------------------
if [ "${#missing_pip[@]}" -gt 0 ] && command -v python3 >/dev/null 2>&1; then
  mapfile -t missing_pip < <(pip_missing)
fi
if [ "${#missing_pip[@]}" -gt 0 ]; then
  echo "$me: pip install ${missing_pip[*]} (tests: tiktoken's and transformers' reference tokenizers, matplotlib plots; the cuDNN frontend's headers)"
  export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
  for p in "${missing_pip[@]}"; do
    deps=(); [ "$p" = nvidia-cudnn-frontend ] && deps=(--no-deps)  # its headers only; not its Python dependencies
    python3 -m pip install -q "${deps[@]}" "$p" </dev/null 2>/dev/null ||
      python3 -m pip install -q --break-system-packages "${deps[@]}" "$p" </dev/null ||  # PEP 668 (Debian's python3)
      echo "$me: warning: pip install $p failed; the tests that need it will skip or fail" >&2
  done
fi
exit 0
