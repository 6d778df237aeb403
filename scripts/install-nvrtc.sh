#!/usr/bin/env bash
# Installs NVIDIA's NVRTC library (libnvrtc, the CUDA C++ runtime compiler) from PyPI into
# <repo>/.nvrtc-local, so that the tests compile every kernel they generate to PTX on a
# machine without a GPU or a CUDA toolkit (CI). NVRTC needs no GPU. The wheel is about
# 58 MB and installs in a few seconds.
#
#   scripts/install-nvrtc.sh     # install if needed; prints the library's path
#
# Prints the path of libnvrtc.so.* on its last line, or nothing there when no NVRTC could
# be installed (no python3/pip, no network): the tests then say that the PTX check was
# skipped. Never fails the build.
#
# Environment:
#   CUMEM_NVRTC_INSTALL=0   skip (use the system's libnvrtc, if any)
#   CUMEM_NVRTC_WHEEL       the pip requirement (default nvidia-cuda-nvrtc==13.5.37)
#
# NVRTC is NVIDIA's, under the CUDA Toolkit EULA (the wheel's License.txt); it is
# downloaded on the machine that runs the tests and never committed.
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="$ROOT/.nvrtc-local"
WHEEL="${CUMEM_NVRTC_WHEEL:-nvidia-cuda-nvrtc==13.5.37}"

find_lib() { find "$DEST" -name 'libnvrtc.so.[0-9]*' -path '*/lib/*' 2>/dev/null | sort | head -n 1; }

if [ "${CUMEM_NVRTC_INSTALL:-1}" = "0" ]; then
    echo "install-nvrtc: CUMEM_NVRTC_INSTALL=0, not installing NVRTC" >&2
    exit 0
fi
lib="$(find_lib)"
if [ -n "$lib" ] && [ -f "$DEST/.requirement" ] && [ "$(cat "$DEST/.requirement")" = "$WHEEL" ]; then
    echo "$lib"
    exit 0
fi
PY="$(command -v python3 || true)"
if [ -z "$PY" ] || ! "$PY" -m pip --version >/dev/null 2>&1; then
    echo "install-nvrtc: no python3 with pip: NVRTC not installed; kernels will not be compiled to PTX in the tests" >&2
    exit 0
fi
rm -rf "$DEST.tmp"
echo "install-nvrtc: installing $WHEEL into $DEST" >&2
if ! PIP_ROOT_USER_ACTION=ignore "$PY" -m pip install --quiet --disable-pip-version-check --no-deps --no-compile \
        --timeout 60 --target "$DEST.tmp" "$WHEEL" >&2; then
    rm -rf "$DEST.tmp"
    echo "install-nvrtc: pip could not install $WHEEL: kernels will not be compiled to PTX in the tests" >&2
    exit 0
fi
rm -rf "$DEST"
mv "$DEST.tmp" "$DEST"
echo "$WHEEL" > "$DEST/.requirement"
find_lib
