#!/usr/bin/env bash
# Build the HPCC ns-3 simulator (alibaba-edu/High-Precision-Congestion-Control, ns-3.17 based) as the
# reference of experiments/hpcc_ref/compare.py. Its GPL source stays outside mvopt: it is cloned
# (or copied from HPCC_SRC) into DEST and built there; nothing of it enters this repository.
#
#   experiments/hpcc_ref/build.sh [DEST]          # DEST default: $HPCC_REF_DIR or /work/hpcc-ref
#   HPCC_SRC=/path/to/checkout experiments/hpcc_ref/build.sh   # build a local copy instead of cloning
#
# Prints the path of the `third` program on its last line. Only the modules `third` needs are built
# (core, network, internet, point-to-point, applications and their dependencies).
# Needs git (unless HPCC_SRC), python2 (waf 1.7 is Python 2; pyenv's 2.7 is used if present) and g++.
# With g++ >= 6 the 2013 sources compile with `-std=c++11 -fpermissive -w` (the repository's
# README asks for gcc-5 instead); the sources are built as the authors wrote them.
set -euo pipefail

REPO_URL=https://github.com/alibaba-edu/High-Precision-Congestion-Control
COMMIT=9f4be2a9ead8a90e8bf732c66bd758c00e58e5be
DEST=${1:-${HPCC_REF_DIR:-/work/hpcc-ref}}
JOBS=${JOBS:-2}

py2=""
for cand in python2.7 python2; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; assert sys.version_info[0] == 2' 2>/dev/null; then
        py2=$cand; break
    fi
done
if [ -z "$py2" ] && command -v pyenv >/dev/null 2>&1; then
    v=$(pyenv versions --bare | grep -E '^2\.7' | tail -1 || true)
    if [ -n "$v" ]; then py2="env PYENV_VERSION=$v python2"; fi
fi
if [ -z "$py2" ]; then
    echo "build.sh: python2 not found (waf 1.7 of ns-3.17 needs Python 2.7)" >&2; exit 2
fi
command -v g++ >/dev/null || { echo "build.sh: g++ not found" >&2; exit 2; }

if [ ! -f "$DEST/simulation/wscript" ]; then
    mkdir -p "$DEST"
    if [ -n "${HPCC_SRC:-}" ]; then
        if [ -d "$HPCC_SRC/.git" ] || git -C "$HPCC_SRC" rev-parse --git-dir >/dev/null 2>&1; then
            git -C "$HPCC_SRC" archive "$COMMIT" | tar -x -C "$DEST"
        else
            cp -a "$HPCC_SRC"/. "$DEST"/
        fi
    else
        git clone --quiet "$REPO_URL" "$DEST/src.git"
        git -C "$DEST/src.git" archive "$COMMIT" | tar -x -C "$DEST"
    fi
fi

cd "$DEST/simulation"
if [ ! -f build/c4che/_cache.py ]; then
    CXXFLAGS="-O2 -w -std=c++11 -fpermissive" $py2 ./waf configure --build-profile=optimized \
        --disable-python --disable-examples --disable-tests \
        --enable-modules=point-to-point,applications,internet >"$DEST/configure.log" 2>&1 \
        || { tail -20 "$DEST/configure.log" >&2; exit 1; }
fi
$py2 ./waf build -j"$JOBS" >"$DEST/build.log" 2>&1 || { grep -m20 -B2 -A5 'error' "$DEST/build.log" >&2; exit 1; }
test -x build/scratch/third
echo "$DEST/simulation/build/scratch/third"
