#!/usr/bin/env bash
# Builds kubectl at the version pinned in hack/lib/versions.sh for each
# platform the images are made for, reproducibly: -trimpath, no VCS stamp,
# and the build date of the k8s.io/kubernetes release (the time the module
# proxy records for its tag) instead of the time of the build.
#
# Layout of the cache directory (printed as the last line of stdout):
#   <dir>/<os>-<arch>/kubectl
#
# Usage:
#   hack/kubectl.sh              build what is missing, then print the directory
#   hack/kubectl.sh --print-dir  only print the directory (builds nothing)
#
# Environment:
#   KUBECTL_PLATFORMS     platforms to build (default "linux/amd64 linux/arm64")
#   MPI_OPERATOR_KUBECTL  cache directory (default
#                         ~/.cache/mpi-operator/kubectl/<kubernetes version>_<go version>)
#
# The Go version is part of the default directory: another toolchain makes
# another binary. A binary is built under a temporary name and moved into
# place, so an interrupted build never leaves a broken one behind.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The images ship the pinned kubectl, whatever version a test control plane
# of the caller's runs (MPI_OPERATOR_KUBE_VERSION, make test-compat).
unset MPI_OPERATOR_KUBE_VERSION
# shellcheck source=hack/lib/versions.sh
source "${ROOT}/hack/lib/versions.sh"
# shellcheck source=hack/lib/prereqs.sh
source "${ROOT}/hack/lib/prereqs.sh"
require_commands flock
# shellcheck source=hack/lib/buildcache.sh
source "${ROOT}/hack/lib/buildcache.sh"

export GOTOOLCHAIN=local
DIR="${MPI_OPERATOR_KUBECTL:-${HOME}/.cache/mpi-operator/kubectl/${KUBE_VERSION}_$(go env GOVERSION)}"
cache_args "${DIR}" "$@"
PLATFORMS="${KUBECTL_PLATFORMS:-linux/amd64 linux/arm64}"

log() { echo "[kubectl $(date +%H:%M:%S)] $*" >&2; }

missing=()
for p in ${PLATFORMS}; do
  [[ -x "${DIR}/${p/\//-}/kubectl" ]] || missing+=("${p}")
done
if ((${#missing[@]} == 0)); then
  echo "${DIR}"
  exit 0
fi

cache_begin "${DIR}" kubectl
export CGO_ENABLED=0
export GOFLAGS="-mod=mod -buildvcs=false"
export GOWORK=off

# shellcheck source=hack/lib/kube.sh
source "${ROOT}/hack/lib/kube.sh"
prepare_kube_module
info="$(mod_json_field "k8s.io/kubernetes@${KUBE_VERSION}" Info)"
# The build date in Kubernetes' own form, without fractions of a second:
# 2026-04-15T18:01:22Z.
released="$(sed -n -E 's/.*"Time": *"([^".]*)(\.[0-9]+)?Z".*/\1Z/p' "${info}")"
[[ "${released}" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$ ]] ||
  { log "no release time in ${info}: ${released}"; exit 1; }
kube_version_xflags "${released}"
ldflags="-s -w"
for x in "${KUBE_XFLAGS[@]}"; do ldflags+=" -X ${x}"; done

for p in "${missing[@]}"; do
  # Another caller may have built it while this one waited for the lock.
  [[ -x "${DIR}/${p/\//-}/kubectl" ]] && continue
  start=${SECONDS}
  log "building kubectl ${KUBE_VERSION} for ${p}"
  mkdir -p "${DIR}/${p/\//-}"
  (cd "${KUBE_MODDIR}" && GOOS="${p%/*}" GOARCH="${p#*/}" nice -n 10 \
    go build -trimpath -ldflags="${ldflags}" -o "${WORK}/kubectl" k8s.io/kubernetes/cmd/kubectl)
  mv -f "${WORK}/kubectl" "${DIR}/${p/\//-}/kubectl.tmp"
  mv -f "${DIR}/${p/\//-}/kubectl.tmp" "${DIR}/${p/\//-}/kubectl"
  log "built kubectl for ${p} in $((SECONDS - start)) s"
done
echo "${DIR}"
