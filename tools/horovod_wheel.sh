#!/usr/bin/env bash
# Build a Horovod wheel once, against the reference torch, for the local cluster's nodes (Debian 12, Python 3.11),
# and keep it in a cache outside the checkout, keyed by every version that goes into it.
#
#   tools/horovod_wheel.sh WHEELHOUSE [IMAGE]
#
# WHEELHOUSE  a folder that already holds the torch wheel (and its dependencies) the nodes install: the build
#             installs that torch, builds horovod==0.28.1 against it (PyTorch, Gloo and MPI support;
#             OpenMPI from the distribution; no TensorFlow, no MXNet; CPU operations: the local nodes have no GPU),
#             and puts horovod-*.whl and Horovod's own dependencies (cloudpickle, psutil, pyyaml, packaging) there.
# IMAGE       the node image to build in (default: the newest localhost/ddp-node image, Debian 12): the wheel links
#             against that image's OpenMPI and libstdc++, so it is for nodes of the same distribution release and
#             Python (here Debian 12, cp311); nodes of another release need a build in an image of theirs.
#
# The wheel is cached in ${DDP_CACHE:-~/.cache/ddp-cluster}/horovod/<key>/ (key: Horovod, the torch wheel, the image's
# id) and copied from there when it exists: a rerun takes seconds, a new machine builds once (about 3.5 min on 2 cores,
# measured here).
# The Horovod sdist comes from PyPI, checked against the sha256 pinned here; the build's packages come from the
# image's signed Debian archive. One change is made to the sdist before the build: C++17 instead of C++14, which
# torch >= 2.1 needs (horovod/horovod#3996; fixed by horovod/horovod#3998, in no Horovod release).
set -euo pipefail

HOROVOD_VERSION=0.28.1
HOROVOD_SDIST_SHA256=92a43f5a94c43907a56805bad15f19700c62ffc83b7ca483f9e104e229f67ef0
[ "$#" -ge 1 ] || { echo "usage: $0 WHEELHOUSE [IMAGE]" >&2; exit 2; }
WHEELHOUSE="$(cd "$1" && pwd)"
IMAGE="${2:-$(podman images --format '{{.Repository}}:{{.Tag}}' --sort created localhost/ddp-node | head -1)}"
[ -n "$IMAGE" ] || { echo "$0: no localhost/ddp-node image: build the local cluster first (make cluster)" >&2; exit 2; }
mapfile -t torch_whls < <(find "$WHEELHOUSE" -maxdepth 1 -name 'torch-*.whl')
[ "${#torch_whls[@]}" -eq 1 ] || { echo "$0: $WHEELHOUSE must hold exactly one torch wheel, found ${#torch_whls[@]}" >&2; exit 2; }
torch_tag="$(basename "${torch_whls[0]}" .whl)"
image_id="$(podman image inspect -f '{{.Id}}' "$IMAGE")"
key="$(printf '%s %s %s' "$HOROVOD_VERSION" "$torch_tag" "$image_id" | sha1sum | cut -c1-12)"
# The host's CA bundle (Debian/Ubuntu or EL path): outgoing TLS may go through a local CA the image does not know.
CA=/etc/ssl/certs/ca-certificates.crt
[ -e "$CA" ] || CA=/etc/pki/tls/certs/ca-bundle.crt
CACHE="${DDP_CACHE:-$HOME/.cache/ddp-cluster}/horovod/$HOROVOD_VERSION-$key"

if ! ls "$CACHE"/horovod-*.whl >/dev/null 2>&1; then
  echo "horovod_wheel: building horovod $HOROVOD_VERSION against $torch_tag in $IMAGE (once; cached in $CACHE)"
  rm -rf "$CACHE.tmp" && mkdir -p "$CACHE.tmp"
  start=$(date +%s)
  # The sdist, checked against its sha256 on PyPI's index (pip --require-hashes).
  printf 'horovod==%s --hash=sha256:%s\n' "$HOROVOD_VERSION" "$HOROVOD_SDIST_SHA256" >"$CACHE.tmp/requirements.txt"
  "${PYTHON:-python3}" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: --require-hashes \
    -r "$CACHE.tmp/requirements.txt" -d "$CACHE.tmp/src"
  podman run --rm --runtime runc --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 \
    -v "$WHEELHOUSE:/wheelhouse:ro" -v "$CACHE.tmp:/out" \
    -v "$CA:/etc/ssl/certs/host-ca.crt:ro" \
    -e HOROVOD_VERSION="$HOROVOD_VERSION" -e TORCH_WHEEL="$torch_tag.whl" -e PIP_CERT=/etc/ssl/certs/host-ca.crt \
    "$IMAGE" bash -euo pipefail -c '
      export DEBIAN_FRONTEND=noninteractive
      apt-get -o Acquire::https::CAInfo=/etc/ssl/certs/host-ca.crt update -qq
      apt-get install -y -qq --no-install-recommends g++ make cmake python3-dev python3-venv libopenmpi-dev openmpi-bin >/dev/null
      python3 -m venv /build
      /build/bin/pip install -q --disable-pip-version-check --no-index --find-links /wheelhouse "/wheelhouse/$TORCH_WHEEL" "numpy<2"
      /build/bin/pip install -q --disable-pip-version-check setuptools wheel
      mkdir /src && tar -xzf /out/src/horovod-$HOROVOD_VERSION.tar.gz -C /src
      cd /src/horovod-$HOROVOD_VERSION
      # torch 2.1 and later compile only as C++17; 0.28.1 builds as C++14 (horovod/horovod#3996, fixed after the
      # release by horovod/horovod#3998). The whole build goes to C++17 (as in horovod/horovod#3941), Gloo included:
      # a C++17 Horovod object beside a C++11/14 Gloo defines gloo::rendezvous::Store::kDefaultTimeout twice.
      sed -i "s/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/" CMakeLists.txt horovod/torch/CMakeLists.txt
      grep -q "CMAKE_CXX_STANDARD 17" CMakeLists.txt && grep -q "CMAKE_CXX_STANDARD 17" horovod/torch/CMakeLists.txt
      HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 HOROVOD_WITHOUT_TENSORFLOW=1 \
        HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS=-j$(nproc) \
        /build/bin/pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps -w /out .
      /build/bin/pip download -q --disable-pip-version-check --only-binary=:all: -d /out \
        cloudpickle psutil pyyaml packaging'
  rm -rf "$CACHE.tmp/src" "$CACHE.tmp/requirements.txt"
  rm -rf "$CACHE" && mv "$CACHE.tmp" "$CACHE"
  echo "horovod_wheel: built in $(( $(date +%s) - start )) s"
fi
cp -f "$CACHE"/*.whl "$WHEELHOUSE"/
ls "$WHEELHOUSE"/horovod-*.whl
