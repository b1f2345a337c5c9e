#!/usr/bin/env bash
# Builds upstream's v2beta1 operator (github.com/kubeflow/mpi-operator, the
# release this project replaces) from the Go module proxy, for the takeover
# test of the v2 operator (v2/test/e2e, TestTakeover), which runs it as a
# process against the local control plane and then hands its jobs over.
#
# Layout of the cache directory (printed as the last line of stdout):
#   <dir>/bin/mpi-operator   upstream's cmd/mpi-operator at that version
#
# The test reads upstream's manifests and examples from the module itself
# (`go mod download -json github.com/kubeflow/mpi-operator@<version>`), not
# from copies.
#
# Usage:
#   hack/upstream-operator.sh              build what is missing, then print the directory
#   hack/upstream-operator.sh --print-dir  only print the directory (builds nothing)
#
# Environment:
#   UPSTREAM_OPERATOR_VERSION  the github.com/kubeflow/mpi-operator version [v0.8.0]
#   MPI_OPERATOR_UPSTREAM      cache directory
#                              (default ~/.cache/mpi-operator/upstream-operator/<version>)
#
# Same rules as hack/testbin.sh: one build at a time per cache directory
# (flock), a binary already there is kept, and it is built under a
# temporary name and renamed into place. Progress goes to stderr; stdout
# only carries the directory.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=hack/lib/prereqs.sh
source "${ROOT}/hack/lib/prereqs.sh"
require_commands flock

UPSTREAM_OPERATOR_VERSION="${UPSTREAM_OPERATOR_VERSION:-v0.8.0}"
UPSTREAM_DIR="${MPI_OPERATOR_UPSTREAM:-${HOME}/.cache/mpi-operator/upstream-operator/${UPSTREAM_OPERATOR_VERSION}}"
MODULE=github.com/kubeflow/mpi-operator

# shellcheck source=hack/lib/buildcache.sh
source "${ROOT}/hack/lib/buildcache.sh"
cache_args "${UPSTREAM_DIR}" "$@"

BIN_DIR="${UPSTREAM_DIR}/bin"
mkdir -p "${BIN_DIR}"

log() { echo "[upstream-operator $(date +%H:%M:%S)] $*" >&2; }

cache_begin "${UPSTREAM_DIR}" upstream-operator

export CGO_ENABLED=0
export GOTOOLCHAIN=local
export GOWORK=off

build_operator() {
  local start=${SECONDS} moddir="${WORK}/upstream"
  log "building upstream's operator (${MODULE}/cmd/mpi-operator, ${UPSTREAM_OPERATOR_VERSION})"
  # `go install pkg@version` first asks the proxy for the module's version
  # list (to report a deprecation), which it refuses for this module path;
  # a throw-away module that requires the version builds it. The module's
  # go.mod has no replace directives, so the versions it requires are the
  # ones selected here too.
  mkdir -p "${moddir}"
  printf 'module testbin/upstream\n\ngo 1.25.0\n\nrequire %s %s\n' "${MODULE}" "${UPSTREAM_OPERATOR_VERSION}" >"${moddir}/go.mod"
  (cd "${moddir}" && GOFLAGS="-mod=mod -buildvcs=false" nice -n 10 \
    go build -trimpath -ldflags="-s -w -X ${MODULE}/pkg/version.Version=${UPSTREAM_OPERATOR_VERSION}" \
    -o "${WORK}/mpi-operator.tmp" "${MODULE}/cmd/mpi-operator")
  # Same filesystem as bin/: the rename is atomic.
  mv -f "${WORK}/mpi-operator.tmp" "${BIN_DIR}/mpi-operator.tmp"
  mv -f "${BIN_DIR}/mpi-operator.tmp" "${BIN_DIR}/mpi-operator"
  log "built upstream's operator in $((SECONDS - start)) s"
}

log "cache directory ${UPSTREAM_DIR}"
[[ -f "${BIN_DIR}/mpi-operator" && -x "${BIN_DIR}/mpi-operator" ]] || build_operator
echo "${UPSTREAM_DIR}"
