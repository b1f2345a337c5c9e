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

TESTBIN_TAG="k8s-${KUBE_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}"
TESTBIN_DIR="${MPI_OPERATOR_TESTBIN:-${HOME}/.cache/mpi-operator/testbin/${TESTBIN_TAG}}"
