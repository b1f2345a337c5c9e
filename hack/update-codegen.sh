#!/usr/bin/env bash
# Regenerates everything derived from the API types of both modules: the v1
# API of the root module (pkg/apis) and the v2beta1 API of the v2 module
# (v2/pkg/apis). For each: deepcopy and defaulter functions, the typed
# clientset, listers and informers under pkg/client, and the CRD under
# manifests/base.
#
# The k8s.io/code-generator binaries are tool dependencies of each go.mod,
# so their version is the one that module pins. controller-gen runs at a
# pinned version outside the module graph, so that its own Kubernetes
# dependencies never move ours.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"

CONTROLLER_TOOLS_VERSION=${CONTROLLER_TOOLS_VERSION:-v0.23.0}
HEADER=${ROOT}/hack/boilerplate.go.txt
export GOFLAGS=-mod=mod

crd_tmp=$(mktemp -d)
trap 'rm -rf "${crd_tmp}"' EXIT

# generate DIR MODULE API: the code and CRD of one API (group/version
# below DIR/pkg/apis) of the module MODULE, which lives in DIR.
generate() {
  local dir=$1 module=$2 api=$3
  local api_pkg="${module}/pkg/apis/${api}"
  echo "${dir}: deepcopy-gen, defaulter-gen"
  (
    cd "${dir}"
    rm -f "pkg/apis/${api}/zz_generated."*.go
    go tool deepcopy-gen --go-header-file "${HEADER}" --output-file zz_generated.deepcopy.go "${api_pkg}"
    go tool defaulter-gen --go-header-file "${HEADER}" --output-file zz_generated.defaults.go "${api_pkg}"
    # defaulter-gen imports k8s.io/api/core/v1 for the pod templates even
    # though core/v1 has no defaulters to call; drop the unused import.
    go tool goimports -w "pkg/apis/${api}/zz_generated.defaults.go"

    echo "${dir}: client-gen, lister-gen, informer-gen"
    rm -rf pkg/client
    go tool client-gen --go-header-file "${HEADER}" \
      --clientset-name versioned \
      --input-base "${module}/pkg/apis" \
      --input "${api}" \
      --output-pkg "${module}/pkg/client/clientset" \
      --output-dir pkg/client/clientset
    go tool lister-gen --go-header-file "${HEADER}" \
      --output-pkg "${module}/pkg/client/listers" \
      --output-dir pkg/client/listers \
      "${api_pkg}"
    go tool informer-gen --go-header-file "${HEADER}" \
      --versioned-clientset-package "${module}/pkg/client/clientset/versioned" \
      --listers-package "${module}/pkg/client/listers" \
      --output-pkg "${module}/pkg/client/informers" \
      --output-dir pkg/client/informers \
      "${api_pkg}"

    echo "${dir}: controller-gen ${CONTROLLER_TOOLS_VERSION}: CRD"
    rm -rf "${crd_tmp:?}"/*
    go run "sigs.k8s.io/controller-tools/cmd/controller-gen@${CONTROLLER_TOOLS_VERSION}" \
      crd:generateEmbeddedObjectMeta=true paths=./pkg/apis/... output:crd:dir="${crd_tmp}"
  )
  # generateEmbeddedObjectMeta declares the pod templates' labels and
  # annotations, which the API server would otherwise prune (or a strict
  # create refuse). The pod templates carry the whole core/v1 PodSpec
  # documentation; without it the CRD fits in the last-applied annotation
  # of a client-side kubectl apply. crdtrim also adds the bounds that no
  # marker can reach, MaxWorkers among them, and lists the versions that
  # other installs stored objects in (see hack/crdtrim).
  go run ./hack/crdtrim -limits "${dir}/pkg/apis/${api}/limits.go" \
    < "${crd_tmp}/kubeflow.org_mpijobs.yaml" > "${dir}/manifests/base/crd.yaml"
}

generate . github.com/kubeflow/mpi-operator kubeflow/v1
generate v2 github.com/kubeflow/mpi-operator/v2 kubeflow/v2beta1
echo "done"
