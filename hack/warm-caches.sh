#!/usr/bin/env bash
# Builds every binary that `make test` takes from the Go module proxy into
# its cache under ~/.cache/mpi-operator, in the order the suites first need
# them: the pinned control plane, the images' kubectl, upstream's v0.8.0
# operator, each Kueue of KUEUE_VERSIONS, then the control plane of each
# Kubernetes version of make test-compat.
#
# .ci/run starts it in the background at the lowest CPU priority before the
# first suite, so that on a machine whose caches are empty the builds use
# the CPU the suites leave idle (most of them wait on a control plane)
# instead of adding about 40 minutes one after another. Every builder holds
# its cache directory's lock (hack/lib/buildcache.sh), so a suite that
# reaches a binary still being built waits for that build and never starts
# a second one; what is already built is skipped in a second or two.
#
# Usage: hack/warm-caches.sh   (progress and one line per build on stderr)
# Environment: KUEUE_VERSIONS (default: the Makefile's, "v0.12.3 v0.17.0").
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
unset MPI_OPERATOR_KUBE_VERSION
# shellcheck source=hack/lib/versions.sh
source "${ROOT}/hack/lib/versions.sh"

log() { echo "[warm-caches $(date +%H:%M:%S)] $*" >&2; }

read -r -a kueue_versions <<<"${KUEUE_VERSIONS:-$(sed -n 's/^KUEUE_VERSIONS ?= //p' Makefile)}"

# step <name> <command...>: runs one builder with its output in a log of
# its own, and says how long it took; a failure is reported and the next
# step runs (the suite that needs the binary builds it again and fails there).
failed=0
step() {
  local name=$1 t=${SECONDS} out
  shift
  out="$(mktemp)"
  if "$@" >"${out}" 2>&1; then
    log "${name}: ready in $((SECONDS - t)) s"
  else
    log "${name}: FAILED after $((SECONDS - t)) s; its output:"
    cat "${out}" >&2
    failed=1
  fi
  rm -f "${out}"
}

start=${SECONDS}
step "control plane ${KUBE_VERSION}" hack/testbin.sh
step "kubectl for the images" hack/kubectl.sh
step "upstream's operator" hack/upstream-operator.sh
for v in "${kueue_versions[@]}"; do
  step "Kueue ${v}" env KUEUE_VERSION="${v}" hack/kueue.sh
done
for compat in "${KUBE_COMPAT_VERSIONS[@]}"; do
  step "control plane ${compat%% *}" env MPI_OPERATOR_KUBE_VERSION="${compat%% *}" hack/testbin.sh
done
log "done in $((SECONDS - start)) s"
exit "${failed}"
