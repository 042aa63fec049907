#!/usr/bin/env bash
# scripts/fetch_gpu_debs.sh -- run HERE (the Debian 12 dev machine, with apt and pip), never on the GPU machine.
#
# Downloads (apt-get download: no install) the .debs of every build dependency that the GPU machine's image may
# lack, plus the shared libraries they need that a minimal image may miss, into .gpu_debs/ at the repo root,
# and the headers of nvidia-cudnn-frontend (pip download --no-deps; the wheel is cut down to include/ and its
# METADATA, 0.5 MB instead of 11.6 MB; FULL_WHEEL=1 keeps the whole wheel). The device tool then carries
# .gpu_debs (ignored through .git/info/exclude, not .gitignore) and scripts/gpu_verify.sh unpacks what the image
# lacks with `dpkg -x` into a private prefix. The package list is scripts/gpu_verify.sh --list-packages.
#
#   bash scripts/fetch_gpu_debs.sh            download, check every package's Depends, print sizes
#   LEAN=1 bash scripts/fetch_gpu_debs.sh     leave out libxml2 + libicu72 (10 MB; only libarchive needs them,
#                                             for the optional prep_data tool)
# The total must stay well under the device tool's 64 MiB (working tree + carried paths); it prints both.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO=$(pwd)
DEST="$REPO/.gpu_debs"

log()  { printf '==> %s\n' "$*"; }
die()  { printf 'ERROR: %s\n' "$*" >&2; exit 1; }

command -v apt-get >/dev/null || die "apt-get not found: run this on the Debian dev machine"
[ "$(dpkg --print-architecture)" = amd64 ] || die "dpkg architecture is $(dpkg --print-architecture); the GPU machine is amd64"

# ---- ignore .gpu_debs without touching .gitignore ---------------------------------------------------------------
EXCL="$(git rev-parse --git-path info/exclude)"
mkdir -p "$(dirname "$EXCL")"
grep -qxF '/.gpu_debs/' "$EXCL" 2>/dev/null || { echo '/.gpu_debs/' >>"$EXCL"; log "added /.gpu_debs/ to $EXCL"; }

# ---- the package list --------------------------------------------------------------------------------------------
mapfile -t PKGS < <(bash scripts/gpu_verify.sh --list-packages | awk '{print $2}' | awk '!seen[$0]++')
if [ "${LEAN:-0}" = 1 ]; then
  mapfile -t PKGS < <(printf '%s\n' "${PKGS[@]}" | grep -vxE 'libxml2|libicu72')
fi
[ "${#PKGS[@]}" -gt 0 ] || die "scripts/gpu_verify.sh --list-packages printed nothing"

rm -rf "$DEST"; mkdir -p "$DEST"
log "apt-get download ${#PKGS[@]} packages into .gpu_debs/"
dl() { (cd "$DEST" && apt-get download "${PKGS[@]}" 2>&1 | grep -vE '^W: Download is performed unsandboxed' ); }
if ! dl; then
  log "apt-get download failed; apt-get update and one more try"
  if [ "$(id -u)" = 0 ]; then apt-get update -q; else sudo -n apt-get update -q; fi
  dl || die "apt-get download failed (see above)"
fi
# Plain names (PACKAGE.deb): apt's names hold '%', '+' and '~' (zlib1g_1%3a1.2.13...), which file transfers may
# refuse; the versions go to MANIFEST.tsv.
for p in "${PKGS[@]}"; do
  f=$(ls "$DEST/${p}"_*.deb 2>/dev/null | head -n 1) || true
  [ -n "$f" ] || die "no .deb for $p after apt-get download"
  mv "$f" "$DEST/$p.deb"
done

# ---- check: every Depends of a carried package is carried, or is expected on any image ----------------------------
# Expected everywhere (a C++/CUDA image with g++): libc6, libgcc-s1, libstdc++6, libgomp1 (g++'s OpenMP), libc-dev.
# Satisfied otherwise: libblas.so.3/liblapack.so.3 come from libopenblas0-openmp (openblas-openmp/ folder, found
# through LD_LIBRARY_PATH); the -dev packages' libblas-dev|liblapack-dev|libtmglib-dev only add link symlinks we
# do not use; googletest is the source tree (libgtest-dev ships the built libraries and GTestConfig.cmake);
# libpcre2-16/32/posix are PCRE2 widths the project does not use; gcc-12-base holds only docs.
ASSUMED='^(libc6|libgcc-s1|libstdc\+\+6|libgomp1|libc-dev|libc6-dev|gcc-12-base|googletest|libblas3|libblas\.so\.3|libblas-dev|libblas\.so|liblapack3|liblapack\.so\.3|liblapack-dev|liblapack\.so|libtmglib-dev|libpcre2-16-0|libpcre2-32-0|libpcre2-posix3)$'
uncovered=()
declare -A CARRIED=(); for p in "${PKGS[@]}"; do CARRIED[$p]=1; done
for f in "$DEST"/*.deb; do
  pkg=$(dpkg-deb -f "$f" Package)
  deps=$(dpkg-deb -f "$f" Depends Pre-Depends | sed 's/^[A-Za-z-]*: //' | tr '\n' ',')
  IFS=',' read -r -a alts <<<"$deps"
  for a in "${alts[@]}"; do
    a=$(echo "$a" | sed 's/([^)]*)//g; s/:any//g; s/ //g'); [ -z "$a" ] && continue
    ok=0
    IFS='|' read -r -a opts <<<"$a"
    for o in "${opts[@]}"; do
      if [ -n "${CARRIED[$o]:-}" ] || [[ "$o" =~ $ASSUMED ]]; then ok=1; break; fi
    done
    [ "$ok" = 1 ] || uncovered+=("$pkg -> $a")
  done
done
if [ "${#uncovered[@]}" -gt 0 ]; then
  printf 'Depends neither carried nor expected on the image (check these):\n'; printf '  %s\n' "${uncovered[@]}"
else
  log "Depends check: every dependency is carried or expected on any g++ image"
fi

# ---- cudnn-frontend headers ---------------------------------------------------------------------------------------
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
log "pip download --no-deps nvidia-cudnn-frontend"
if python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
     --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
     --platform manylinux2014_x86_64 -d "$tmp" "nvidia-cudnn-frontend${CUDNN_FRONTEND_VERSION:+==$CUDNN_FRONTEND_VERSION}"; then
  whl=$(ls "$tmp"/nvidia_cudnn_frontend-*.whl | head -n 1)
  if [ "${FULL_WHEEL:-0}" = 1 ]; then
    cp "$whl" "$DEST/"
  else
    ver=$(basename "$whl" | cut -d- -f2)
    python3 - "$whl" "$DEST/nvidia_cudnn_frontend-$ver-include.zip" <<'EOF'
import sys, zipfile
src, dst = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zo:
    n = 0
    for i in zi.infolist():
        if i.filename.startswith("include/") or i.filename.endswith(".dist-info/METADATA"):
            zo.writestr(i, zi.read(i)); n += 1
assert any(x.endswith("include/cudnn_frontend.h") for x in zipfile.ZipFile(dst).namelist()), "no cudnn_frontend.h"
print("    %s: %d files (include/ + METADATA) from %s" % (dst.split("/")[-1], n, src.split("/")[-1]))
EOF
  fi
else
  echo "WARNING: pip download nvidia-cudnn-frontend failed; the GPU build goes on without cudnn-frontend" >&2
fi

# ---- manifest and sizes ---------------------------------------------------------------------------------------------
{
  printf '# group\tpackage\tversion\tfile\tbytes -- written by scripts/fetch_gpu_debs.sh on %s (%s)\n' "$(date -u +%FT%TZ)" "$(. /etc/os-release; echo "$PRETTY_NAME")"
  bash scripts/gpu_verify.sh --list-packages | while read -r g p; do
    f="$DEST/$p.deb"
    [ -f "$f" ] && printf '%s\t%s\t%s\t%s\t%s\n' "$g" "$p" "$(dpkg-deb -f "$f" Version)" "$(basename "$f")" "$(stat -c %s "$f")"
  done
  for z in "$DEST"/*.zip "$DEST"/*.whl; do
    [ -f "$z" ] && printf 'cudnn_frontend\tnvidia-cudnn-frontend\t%s\t%s\t%s\n' "$(basename "$z" | cut -d- -f2)" "$(basename "$z")" "$(stat -c %s "$z")"
  done
} >"$DEST/MANIFEST.tsv"

log ".gpu_debs/ contents:"
(cd "$DEST" && ls -l --block-size=1 | awk 'NR>1{printf "  %10d  %s\n", $5, $9}')
debs_b=$(du -sb "$DEST" | cut -f1)
tree_b=$(git ls-files -z -co --exclude-standard | while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done | du -cb --files0-from=- 2>/dev/null | tail -n 1 | cut -f1)
mib() { awk -v b="$1" 'BEGIN{printf "%.1f MiB", b/1048576}'; }
echo "  total .gpu_debs: $(mib "$debs_b") ($(ls "$DEST"/*.deb | wc -l) .debs)"
echo "  working tree that travels (tracked + untracked-not-ignored): $(mib "$tree_b")"
echo "  together: $(mib $((debs_b + tree_b))) of the device tool's 64 MiB"
if [ $((debs_b + tree_b)) -gt $((56 * 1048576)) ]; then
  echo "WARNING: over 56 MiB: try LEAN=1, or look for large untracked files in the tree" >&2
fi
