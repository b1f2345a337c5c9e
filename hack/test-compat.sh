#!/usr/bin/env bash
# make test-compat: the product on each Kubernetes version of
# hack/lib/versions.sh's KUBE_COMPAT_VERSIONS (the oldest minor the README
# claims and the newest release), besides the pinned KUBE_VERSION that
# every other suite runs on. For each version it builds that control plane
# (hack/testbin.sh, into a cache directory of its own) and runs, with
# MPI_OPERATOR_KUBE_VERSION set so that each suite starts a control plane of
# that version with its kubectl, a part of the existing suites:
#
#   test/e2e TestE2E             the v1 install (both overlays) with kubectl,
#                                the v1 operator binary, every example to
#                                Running, kubectl scale up (discover_hosts.sh,
#                                the launcher's exec rights) and past
#                                maxReplicas (refused), scale up and down
#                                through SIGKILLs, garbage collection, metrics
#   test/integration             malformed v1 jobs refused with messages that
#     (CRD tests)                name the field, the scale subresource's bounds,
#                                the read-only old versions (optionalOldSelf)
#   v2/test/e2e TestE2E          the v2beta1 install (its ValidatingAdmission-
#                                Policy included) with kubectl, the v2 operator
#                                binary, pi and the elastic example to Running,
#                                kubectl scale to 4 and to 1 with
#                                discover_hosts.sh following, suspend, resume
#   v2/test/integration          malformed and badly edited v2beta1 jobs,
#     (CRD tests)                defaults, scale, kubectl explain, the v2 CRD
#                                over the v1 install
#
# Usage (after make build; make test-compat does both):
#   hack/test-compat.sh                  every compatibility version
#   COMPAT_VERSIONS=v1.30.14 hack/test-compat.sh
#   COMPAT_SUITES="v1-e2e v2-e2e" hack/test-compat.sh
# Progress and timings go to stderr, the suites' output (go test -v) to
# stdout; each suite fails at once unless the API server and kubectl it
# got are of the version asked for (test/harness). The first
# run of a version builds its control plane (several minutes; see
# docs/compatibility.md).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
# shellcheck source=hack/lib/versions.sh
source "${ROOT}/hack/lib/versions.sh"

GO="${GO:-go}"
log() { echo "[test-compat $(date +%H:%M:%S)] $*" >&2; }

# The tests of each suite that exercise what may differ between Kubernetes
# versions: admission (CEL rules, the policy), kubectl (apply -k, scale,
# explain), the scale subresource, garbage collection, the operators' use
# of the API.
V1_INTEGRATION='^(TestMalformedJobs|TestScaleBeyondBounds|TestElasticBoundsAreRejected|TestUndecodableJobsAreSkipped)$'
V2_INTEGRATION='^(TestMalformedJobs|TestSchemaDefaults|TestBadEdits|TestTemplateMetadataKept|TestUpstreamJobsAccepted|TestScale|TestExplain|TestCRDOverOwnV1Install)$'

# run_suite <name>: one suite on the control plane of MPI_OPERATOR_KUBE_VERSION.
run_suite() {
  case "$1" in
  v1-e2e) "${GO}" test -v -count=1 -timeout 20m ./test/e2e/ -run '^TestE2E$' ;;
  v1-integration) "${GO}" test -v -count=1 -timeout 15m ./test/integration/ -run "${V1_INTEGRATION}" ;;
  v2-e2e) (cd v2 && "${GO}" test -v -count=1 -timeout 20m ./test/e2e/ -run '^TestE2E$') ;;
  v2-integration) (cd v2 && "${GO}" test -v -count=1 -timeout 15m ./test/integration/ -run "${V2_INTEGRATION}") ;;
  *)
    log "unknown suite $1 (known: v1-e2e v1-integration v2-e2e v2-integration)"
    return 2
    ;;
  esac
}

read -r -a versions <<<"${COMPAT_VERSIONS:-${KUBE_COMPAT_VERSIONS[*]%% *}}"
read -r -a suites <<<"${COMPAT_SUITES:-v1-e2e v1-integration v2-e2e v2-integration}"

start=${SECONDS}
failed=()
summary=()
for version in "${versions[@]}"; do
  export MPI_OPERATOR_KUBE_VERSION="${version}"
  t=${SECONDS}
  log "Kubernetes ${version}: building what is missing in $(hack/testbin.sh --print-dir)"
  hack/testbin.sh >/dev/null
  line="${version}: control plane ready in $((SECONDS - t)) s"
  for suite in "${suites[@]}"; do
    t=${SECONDS}
    log "Kubernetes ${version}: ${suite}"
    if run_suite "${suite}"; then
      line+=", ${suite} passed in $((SECONDS - t)) s"
    else
      line+=", ${suite} FAILED in $((SECONDS - t)) s"
      failed+=("${version} ${suite}")
    fi
  done
  summary+=("${line}")
done

log "finished in $((SECONDS - start)) s"
for line in "${summary[@]}"; do log "  ${line}"; done
if ((${#failed[@]} > 0)); then
  log "failed: ${failed[*]}"
  exit 1
fi
