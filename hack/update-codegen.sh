#!/usr/bin/env bash
# Regenerates everything derived from the API types in pkg/apis:
# deepcopy and defaulter functions, the typed clientset, listers and
# informers under pkg/client, and the CRD under manifests/base.
#
# The k8s.io/code-generator binaries are tool dependencies of go.mod, so
# their version is the one the module pins. controller-gen runs at a pinned
# version outside the module graph, so that its own Kubernetes dependencies
# never move ours.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"

CONTROLLER_TOOLS_VERSION=${CONTROLLER_TOOLS_VERSION:-v0.23.0}
MODULE=github.com/kubeflow/mpi-operator
APIS=(kubeflow/v1)
HEADER=hack/boilerplate.go.txt
export GOFLAGS=-mod=mod

api_pkgs=()
for api in "${APIS[@]}"; do
  api_pkgs+=("${MODULE}/pkg/apis/${api}")
  rm -f "pkg/apis/${api}/zz_generated."*.go
done

echo "deepcopy-gen, defaulter-gen"
go tool deepcopy-gen --go-header-file "${HEADER}" --output-file zz_generated.deepcopy.go "${api_pkgs[@]}"
go tool defaulter-gen --go-header-file "${HEADER}" --output-file zz_generated.defaults.go "${api_pkgs[@]}"
# defaulter-gen imports k8s.io/api/core/v1 for the pod templates even though
# core/v1 has no defaulters to call; drop the unused import.
for api in "${APIS[@]}"; do
  go tool goimports -w "pkg/apis/${api}/zz_generated.defaults.go"
done

echo "client-gen, lister-gen, informer-gen"
rm -rf pkg/client
go tool client-gen --go-header-file "${HEADER}" \
  --clientset-name versioned \
  --input-base "${MODULE}/pkg/apis" \
  --input "$(IFS=,; echo "${APIS[*]}")" \
  --output-pkg "${MODULE}/pkg/client/clientset" \
  --output-dir pkg/client/clientset
go tool lister-gen --go-header-file "${HEADER}" \
  --output-pkg "${MODULE}/pkg/client/listers" \
  --output-dir pkg/client/listers \
  "${api_pkgs[@]}"
go tool informer-gen --go-header-file "${HEADER}" \
  --versioned-clientset-package "${MODULE}/pkg/client/clientset/versioned" \
  --listers-package "${MODULE}/pkg/client/listers" \
  --output-pkg "${MODULE}/pkg/client/informers" \
  --output-dir pkg/client/informers \
  "${api_pkgs[@]}"

echo "controller-gen ${CONTROLLER_TOOLS_VERSION}: CRD"
crd_tmp=$(mktemp -d)
trap 'rm -rf "${crd_tmp}"' EXIT
go run "sigs.k8s.io/controller-tools/cmd/controller-gen@${CONTROLLER_TOOLS_VERSION}" \
  crd:generateEmbeddedObjectMeta=true paths=./pkg/apis/... output:crd:dir="${crd_tmp}"
# generateEmbeddedObjectMeta declares the pod templates' labels and
# annotations, which the API server would otherwise prune (or a strict
# create refuse). The pod templates carry the whole core/v1 PodSpec
# documentation; without it the CRD fits in the last-applied annotation of a
# client-side kubectl apply. crdtrim also lists the versions upstream
# installs stored objects in (see hack/crdtrim).
go run ./hack/crdtrim < "${crd_tmp}/kubeflow.org_mpijobs.yaml" > manifests/base/crd.yaml
echo "done"
