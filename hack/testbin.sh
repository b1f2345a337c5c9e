#!/usr/bin/env bash
# Builds the binaries of the local test control plane from source, at the
# versions pinned in hack/lib/versions.sh:
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok
# plus kwok's stage definitions (kwok exits "no stages found" without them).
#
# Layout of the cache directory (printed as the last line of stdout):
#   <dir>/bin/<binary>
#   <dir>/kwok-stages/{node-fast,node-heartbeat-with-lease,pod-fast}/*.yaml
#
# Usage:
#   hack/testbin.sh              build what is missing, then print the directory
#   hack/testbin.sh --print-dir  only print the directory (builds nothing)
#
# Environment:
#   MPI_OPERATOR_TESTBIN       cache directory
#                              (default ~/.cache/mpi-operator/testbin/<version tag>)
#   MPI_OPERATOR_KUBE_VERSION  a Kubernetes version of KUBE_COMPAT_VERSIONS in
#                              hack/lib/versions.sh to build instead of the
#                              pinned KUBE_VERSION; its tag, and so its
#                              default directory, is its own
#
# Everything that is already built (an executable file in bin/) is skipped.
# A binary is built under a temporary name and moved into place, so an
# interrupted build never leaves a broken binary behind. The throw-away Go
# modules live in a temporary directory under the cache directory, never in
# the work tree. Progress goes to stderr; stdout only carries the directory.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=hack/lib/versions.sh
source "${ROOT}/hack/lib/versions.sh"
# shellcheck source=hack/lib/prereqs.sh
source "${ROOT}/hack/lib/prereqs.sh"
require_commands flock

# shellcheck source=hack/lib/buildcache.sh
source "${ROOT}/hack/lib/buildcache.sh"
cache_args "${TESTBIN_DIR}" "$@"

BIN_DIR="${TESTBIN_DIR}/bin"
STAGES_DIR="${TESTBIN_DIR}/kwok-stages"
mkdir -p "${BIN_DIR}"

log() { echo "[testbin $(date +%H:%M:%S)] $*" >&2; }

# One build at a time per cache directory: a second caller (say cluster-up.sh
# started by a test while a developer runs this script) waits here.
cache_begin "${TESTBIN_DIR}" testbin

export CGO_ENABLED=0
export GOTOOLCHAIN=local
# -buildvcs=false: the throw-away modules are not in a VCS checkout anyway.
export GOFLAGS="-mod=mod -buildvcs=false"
# Keep the throw-away modules away from any go.work of the caller.
export GOWORK=off

# Wall-clock seconds of each step, printed in the summary.
declare -a SUMMARY=()

# go_build <name> <package> <module dir> [extra -X ldflags...]
# Builds <package> within the module in <module dir> into bin/<name>.
go_build() {
  local name="$1" pkg="$2" moddir="$3"
  shift 3
  local ldflags="-s -w" x
  for x in "$@"; do ldflags+=" -X ${x}"; done
  local start=${SECONDS}
  log "building ${name} (${pkg})"
  (cd "${moddir}" && nice -n 10 go build -trimpath -ldflags="${ldflags}" -o "${WORK}/${name}.tmp" "${pkg}")
  # Same filesystem as bin/: the rename is atomic.
  mv -f "${WORK}/${name}.tmp" "${BIN_DIR}/${name}.tmp"
  mv -f "${BIN_DIR}/${name}.tmp" "${BIN_DIR}/${name}"
  SUMMARY+=("${name}: $((SECONDS - start)) s")
  log "built ${name} in $((SECONDS - start)) s"
}

have() { [[ -f "${BIN_DIR}/$1" && -x "${BIN_DIR}/$1" ]]; }

# --- etcd -----------------------------------------------------------------
build_etcd() {
  local moddir="${WORK}/etcd"
  mkdir -p "${moddir}"
  cat >"${moddir}/go.mod" <<EOF
module testbin/etcd

go 1.24

require go.etcd.io/etcd/server/v3 ${ETCD_VERSION}
EOF
  go_build etcd go.etcd.io/etcd/server/v3 "${moddir}" \
    "go.etcd.io/etcd/api/v3/version.GitSHA=${ETCD_VERSION}"
}

# --- Kubernetes -------------------------------------------------------------
# shellcheck source=hack/lib/kube.sh
source "${ROOT}/hack/lib/kube.sh"

build_kube() {
  local name="$1"
  if [[ -z "${KUBE_MODDIR}" ]]; then
    local start=${SECONDS}
    log "downloading k8s.io/kubernetes@${KUBE_VERSION} module metadata"
    prepare_kube_module
    log "kubernetes module ready ($((SECONDS - start)) s)"
  fi
  kube_version_xflags "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  go_build "${name}" "k8s.io/kubernetes/cmd/${name}" "${KUBE_MODDIR}" "${KUBE_XFLAGS[@]}"
}

# --- kwok -------------------------------------------------------------------
build_kwok() {
  local start=${SECONDS}
  log "building kwok (sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION})"
  # go install pkg@version ignores any go.mod and refuses -mod=mod.
  (cd "${WORK}" && GOBIN="${WORK}/kwok-bin" GOFLAGS=-buildvcs=false nice -n 10 \
    go install -trimpath -ldflags="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION}" \
    "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}")
  mv -f "${WORK}/kwok-bin/kwok" "${BIN_DIR}/kwok.tmp"
  mv -f "${BIN_DIR}/kwok.tmp" "${BIN_DIR}/kwok"
  SUMMARY+=("kwok: $((SECONDS - start)) s")
  log "built kwok in $((SECONDS - start)) s"
}

copy_kwok_stages() {
  local start=${SECONDS}
  local src
  src="$(mod_json_field "sigs.k8s.io/kwok@${KWOK_VERSION}" Dir)"
  [[ -d "${src}/kustomize/stage" ]] || { log "no kustomize/stage in ${src}"; exit 1; }
  local tmp="${WORK}/kwok-stages" s
  mkdir -p "${tmp}"
  for s in node/fast node/heartbeat-with-lease pod/fast; do
    mkdir -p "${tmp}/${s/\//-}"
    # Only the Stage manifests; kustomization.yaml is not a kwok config.
    find "${src}/kustomize/stage/${s}" -maxdepth 1 -name '*.yaml' ! -name kustomization.yaml \
      -exec cp {} "${tmp}/${s/\//-}/" \;
  done
  chmod -R u+w "${tmp}" # the module cache is read-only
  rm -rf "${STAGES_DIR}.old"
  [[ -d "${STAGES_DIR}" ]] && mv "${STAGES_DIR}" "${STAGES_DIR}.old"
  mv "${tmp}" "${STAGES_DIR}"
  rm -rf "${STAGES_DIR}.old"
  touch "${STAGES_DIR}/.complete"
  SUMMARY+=("kwok stages: $((SECONDS - start)) s")
  log "copied kwok stages to ${STAGES_DIR}"
}

TOTAL_START=${SECONDS}
log "cache directory ${TESTBIN_DIR}"
have etcd || build_etcd
for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  have "${b}" || build_kube "${b}"
done
have kwok || build_kwok
[[ -f "${STAGES_DIR}/.complete" ]] || copy_kwok_stages

if [[ ${#SUMMARY[@]} -eq 0 ]]; then
  log "everything already built"
else
  log "done in $((SECONDS - TOTAL_START)) s"
  for s in "${SUMMARY[@]}"; do log "  ${s}"; done
fi
echo "${TESTBIN_DIR}"
