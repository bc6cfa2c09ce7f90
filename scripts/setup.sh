#!/usr/bin/env bash
# Installs the test toolchain on a fresh Debian bookworm machine, on top of what running packer
# needs (scripts/install.sh: the cgo build's libraries, ffmpeg, Go modules, packer on PATH): clang-14
# for the PTX build, the reference implementations and test data (Pillow, NumPy, h5py, PyTorch,
# torchvision, Fashion-MNIST, wallpapers as real photos), ptxas, and bin/packer for the tests.
# Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh

packages=(
  build-essential git
  clang-14
  python3 python3-pip python3-venv python3-numpy python3-pil python3-h5py python3-pytest python3-crc32c
  python3-protobuf  # the TFRecord fixtures' tf.train.Example encoder
  python3-boto3  # the Python reader's s3:// tests (packer_reader[s3])
  python3-torch python3-torchvision
  dataset-fashion-mnist ukui-wallpapers
  strace  # TestCommitCrashPoints kills builds at each commit syscall
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# ptxas (the PTX assembler) from PyPI's nvidia-cuda-nvcc-cu12 wheel, so the test suite can
# assemble the checked-in PTX for current GPU architectures. Only the one binary is extracted.
PTXAS_VERSION=12.9.86
PTXAS_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/packer/ptxas-$PTXAS_VERSION"
if [ ! -x "$PTXAS_DIR/ptxas" ]; then
  tmp=$(mktemp -d)
  if /usr/bin/python3 -m pip download --no-deps --quiet --disable-pip-version-check -d "$tmp" \
      "nvidia-cuda-nvcc-cu12==$PTXAS_VERSION"; then
    mkdir -p "$PTXAS_DIR"
    /usr/bin/python3 - "$tmp" "$PTXAS_DIR" <<'PYEOF'
import glob, os, sys, zipfile
wheel = glob.glob(os.path.join(sys.argv[1], "*.whl"))[0]
with zipfile.ZipFile(wheel) as z:
    data = z.read("nvidia/cuda_nvcc/bin/ptxas")
path = os.path.join(sys.argv[2], "ptxas")
with open(path + ".tmp", "wb") as f:
    f.write(data)
os.chmod(path + ".tmp", 0o755)
os.rename(path + ".tmp", path)
PYEOF
  else
    echo "setup: could not download ptxas from PyPI; the PTX assembly test will be skipped" >&2
  fi
  rm -rf "$tmp"
fi

# The record-format sources' test fixtures are written by the real clients, which Debian
# bookworm does not package: pyarrow (Parquet), webdataset (its TarWriter) and tfrecord (its
# TFRecordWriter). A venv over
# Debian's Python (its NumPy) with the pinned wheels from PyPI; the tests find it here
# (PACKER_FIXTURE_PYTHON overrides).
FIXTURE_VENV="${XDG_CACHE_HOME:-$HOME/.cache}/packer/fixtures-venv-1"
if ! "$FIXTURE_VENV/bin/python" -c "import pyarrow, webdataset, tfrecord" >/dev/null 2>&1; then
  rm -rf "$FIXTURE_VENV"
  /usr/bin/python3 -m venv --system-site-packages "$FIXTURE_VENV"
  # The registry here has served tfrecord 1.14.5 on some days and only up to 1.14.4 on others
  # (the TFRecord framing both write is the same): try the pins in order.
  ok=
  for tfrecord in 1.14.5 1.14.4; do
    if "$FIXTURE_VENV/bin/pip" install --quiet --disable-pip-version-check --only-binary=:all: \
      "pyarrow==17.0.0" "webdataset==0.2.111" "tfrecord==$tfrecord"; then
      ok=1
      break
    fi
  done
  if [ -z "$ok" ]; then
    echo "setup: could not install the record-format fixture writers (pyarrow, webdataset, tfrecord) from PyPI" >&2
    exit 1
  fi
fi

# packer_reader's hardware CRC-32C for the source tree (python/packer_reader/_lib/, git-ignored;
# gcc comes with build-essential above). scripts/test.sh requires it (PACKER_REQUIRE_CRC_HW=1).
bash scripts/build-crc.sh

go build -o bin/packer ./cmd/packer
echo "setup: done ($(go version), packer built at bin/packer)"
