#!/usr/bin/env bash
# A real, measured Horovod run here, and ddlsim's prediction of it (README: "Measured Horovod
# on this machine"). On a fresh Debian/Ubuntu machine this:
#   1. installs the system packages Horovod's build needs, only those missing (cmake, g++,
#      make, the Python headers; sudo only when not root);
#   2. installs the `horovod` extra: tensorflow-cpu 2.18.1 and Keras first (Horovod's build
#      compiles against the TensorFlow it finds, so it is built without build isolation), then
#      Horovod 0.28.1 with TensorFlow and Gloo (no MPI, PyTorch or MXNet), and ddlsim itself;
#      building Horovod takes about 20 minutes on 2 cores, once;
#   3. runs `python -m ddlsim.tools.hvdlocal "$@"`: calibrate the model on one core, measure
#      Horovod with 1 and 2 workers over Gloo, predict both with ddlsim, print the table and
#      write traces/horovod/ and calibration/epyc-zen4-core/ (about 6 minutes on 2 cores).
# Options go to the driver, e.g. --quick (smoke test), --model, --batch, --out DIR.
# PYTHON=/path/to/python selects the interpreter (default: python3).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
command -v make >/dev/null 2>&1 || missing+=(make)
if ! "$PY" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
    missing+=(python3-dev)
fi
if ((${#missing[@]})); then
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "horovod_local.sh: install ${missing[*]} first (no apt-get here)" >&2
        exit 2
    fi
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    echo "horovod_local.sh: installing ${missing[*]}" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

pip_install() { "$PY" -m pip install --disable-pip-version-check "$@"; }
horovod_ok() {
    "$PY" -c 'import horovod, horovod.tensorflow as hvd
assert horovod.__version__ == "0.28.1" and hvd.gloo_built()' >/dev/null 2>&1
}
# Horovod's setup.py compiles against the TensorFlow it imports: install TensorFlow first, then
# build Horovod without build isolation (once; a Horovod without TensorFlow + Gloo is rebuilt)
pip_install "tensorflow-cpu==2.18.1" "keras>=3.5,<3.16"
if ! horovod_ok; then
    "$PY" -m pip uninstall -y -q horovod >/dev/null 2>&1 || true
    HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 \
        HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 \
        pip_install --no-build-isolation --no-cache-dir "horovod==0.28.1"
    horovod_ok || { echo "horovod_local.sh: Horovod 0.28.1 with Gloo did not build" >&2; exit 2; }
fi
pip_install -e '.[horovod]' # ddlsim and the extra (Horovod is already satisfied)

exec "$PY" -m ddlsim.tools.hvdlocal "$@"
