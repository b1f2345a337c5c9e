#!/usr/bin/env bash
# Builds Kueue's manager from the Go module proxy and extracts Kueue's CRDs
# from its module, for the Kueue suite (v2/test/kueue) that runs the manager
# as a process against the local control plane of hack/cluster-up.sh.
#
# Layout of the cache directory (printed as the last line of stdout):
#   <dir>/bin/kueue               the manager (sigs.k8s.io/kueue/cmd/kueue)
#   <dir>/crds/*.yaml             config/components/crd/bases of the module
#
# Usage:
#   hack/kueue.sh              build what is missing, then print the directory
#   hack/kueue.sh --print-dir  only print the directory (builds nothing)
#
# Environment:
#   KUEUE_VERSION          the sigs.k8s.io/kueue version [v0.12.3]; make
#                          test-kueue runs each of KUEUE_VERSIONS
#                          (v0.12.3 and v0.17.0), each in its own cache
#   MPI_OPERATOR_KUEUE     cache directory
#                          (default ~/.cache/mpi-operator/kueue/<version>)
#
# Same rules as hack/testbin.sh: one build at a time per cache directory
# (flock), what is already there is skipped, the binary is built under a
# temporary name and renamed into place, the CRDs are copied to a temporary
# directory and renamed into place. Progress goes to stderr; stdout only
# carries the directory.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=hack/lib/prereqs.sh
source "${ROOT}/hack/lib/prereqs.sh"
require_commands flock

# Of the versions with the kubeflow.org/mpijob integration, the module
# proxy here serves v0.12.3, v0.14.0, v0.15.0 and v0.17.0 (v0.13.x and
# v0.16.0 answer 403). The layout of the module is the same in all of them.
KUEUE_VERSION="${KUEUE_VERSION:-v0.12.3}"
KUEUE_DIR="${MPI_OPERATOR_KUEUE:-${HOME}/.cache/mpi-operator/kueue/${KUEUE_VERSION}}"

# shellcheck source=hack/lib/buildcache.sh
source "${ROOT}/hack/lib/buildcache.sh"
cache_args "${KUEUE_DIR}" "$@"

BIN_DIR="${KUEUE_DIR}/bin"
CRD_DIR="${KUEUE_DIR}/crds"
mkdir -p "${BIN_DIR}"

log() { echo "[kueue $(date +%H:%M:%S)] $*" >&2; }

cache_begin "${KUEUE_DIR}" kueue

export CGO_ENABLED=0
export GOTOOLCHAIN=local
export GOWORK=off

build_manager() {
  local start=${SECONDS} moddir="${WORK}/kueue"
  log "building the Kueue manager (sigs.k8s.io/kueue/cmd/kueue, ${KUEUE_VERSION})"
  # A throw-away module that requires Kueue: `go install pkg@version` asks
  # the proxy for the module's version list (its deprecation check), which
  # answers 403 for sigs.k8s.io/kueue. Kueue's go.mod has no replace
  # directives, so its own requirements select the same versions here.
  # Its go line is Kueue's own (go 1.24.0 for v0.12.3, 1.25.0 for v0.17.0).
  local gomod goversion
  gomod="$(mod_json_field "sigs.k8s.io/kueue@${KUEUE_VERSION}" GoMod)"
  goversion="$(sed -n 's/^go \([0-9.]*\)[[:space:]]*$/\1/p' "${gomod}" | head -n1)"
  [[ -n "${goversion}" ]] || { log "no go line in ${gomod}"; exit 1; }
  mkdir -p "${moddir}"
  printf 'module testbin/kueue\n\ngo %s\n\nrequire sigs.k8s.io/kueue %s\n' "${goversion}" "${KUEUE_VERSION}" >"${moddir}/go.mod"
  (cd "${moddir}" && GOFLAGS="-mod=mod -buildvcs=false" nice -n 10 \
    go build -trimpath -ldflags="-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=${KUEUE_VERSION}" \
    -o "${WORK}/kueue.tmp" sigs.k8s.io/kueue/cmd/kueue)
  # Same filesystem as bin/: the rename is atomic.
  mv -f "${WORK}/kueue.tmp" "${BIN_DIR}/kueue.tmp"
  mv -f "${BIN_DIR}/kueue.tmp" "${BIN_DIR}/kueue"
  log "built the Kueue manager in $((SECONDS - start)) s"
}

copy_crds() {
  local src
  src="$(mod_json_field "sigs.k8s.io/kueue@${KUEUE_VERSION}" Dir)"
  [[ -d "${src}/config/components/crd/bases" ]] || { log "no config/components/crd/bases in ${src}"; exit 1; }
  local tmp="${WORK}/crds"
  mkdir -p "${tmp}"
  cp "${src}"/config/components/crd/bases/*.yaml "${tmp}/"
  chmod -R u+w "${tmp}" # the module cache is read-only
  rm -rf "${CRD_DIR}.old"
  [[ -d "${CRD_DIR}" ]] && mv "${CRD_DIR}" "${CRD_DIR}.old"
  mv "${tmp}" "${CRD_DIR}"
  rm -rf "${CRD_DIR}.old"
  touch "${CRD_DIR}/.complete"
  log "copied Kueue's CRDs to ${CRD_DIR}"
}

log "cache directory ${KUEUE_DIR}"
[[ -f "${BIN_DIR}/kueue" && -x "${BIN_DIR}/kueue" ]] || build_manager
[[ -f "${CRD_DIR}/.complete" ]] || copy_crds
echo "${KUEUE_DIR}"
