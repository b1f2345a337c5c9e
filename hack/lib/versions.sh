#!/usr/bin/env bash
# Pinned versions of the local test control plane (hack/testbin.sh builds them,
# hack/cluster-up.sh runs them). This is the ONLY place they are set: change a
# version here and the cache directory name changes with it, so binaries of
# different versions never mix.
# shellcheck disable=SC2034  # sourced by the other hack/ scripts

KUBE_VERSION="v1.35.4"          # k8s.io/kubernetes: kube-apiserver, -controller-manager, -scheduler, kubectl
KUBE_STAGING_VERSION="v0.35.4"  # published k8s.io/<staging> modules matching KUBE_VERSION
ETCD_VERSION="v3.6.6"           # go.etcd.io/etcd/server/v3
KWOK_VERSION="v0.8.0"           # sigs.k8s.io/kwok

# The other Kubernetes versions the project is tested on (make test-compat,
# docs/compatibility.md): the oldest minor the README claims and the newest
# release, each "<k8s.io/kubernetes> <k8s.io/<staging> modules>". Every
# suite runs on KUBE_VERSION; MPI_OPERATOR_KUBE_VERSION=<one of these>
# makes hack/testbin.sh, hack/cluster-up.sh and the suites started through
# test/harness build and run that version instead, in a cache directory of
# its own (etcd and kwok stay as above).
KUBE_COMPAT_VERSIONS=(
  "v1.30.14 v0.30.14"
  "v1.37.2 v0.37.2"
)

if [[ -n "${MPI_OPERATOR_KUBE_VERSION:-}" && "${MPI_OPERATOR_KUBE_VERSION}" != "${KUBE_VERSION}" ]]; then
  kube_compat_found=""
  for kube_compat in "${KUBE_COMPAT_VERSIONS[@]}"; do
    if [[ "${kube_compat%% *}" == "${MPI_OPERATOR_KUBE_VERSION}" ]]; then
      KUBE_VERSION="${kube_compat%% *}"
      KUBE_STAGING_VERSION="${kube_compat##* }"
      kube_compat_found=1
    fi
  done
  if [[ -z "${kube_compat_found}" ]]; then
    echo "MPI_OPERATOR_KUBE_VERSION=${MPI_OPERATOR_KUBE_VERSION} is not a version of hack/lib/versions.sh;" \
      "known: ${KUBE_VERSION} ${KUBE_COMPAT_VERSIONS[*]%% *}" >&2
    exit 2
  fi
  unset kube_compat kube_compat_found
fi

TESTBIN_TAG="k8s-${KUBE_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}"
TESTBIN_DIR="${MPI_OPERATOR_TESTBIN:-${HOME}/.cache/mpi-operator/testbin/${TESTBIN_TAG}}"
