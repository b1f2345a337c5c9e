#!/usr/bin/env bash
# Fails when the generated code or CRDs of either module differ from what
# the API types generate: regenerates into a copy of the tree and compares.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT

# Copy the tree as it is, without build output and git metadata.
tar -C "${ROOT}" --exclude=./.git --exclude=./_output -cf - . | tar -C "${tmp}" -xf -
"${tmp}/hack/update-codegen.sh" > /dev/null

status=0
for path in pkg/apis pkg/client manifests/base/crd.yaml \
  v2/pkg/apis v2/pkg/client v2/manifests/base/crd.yaml; do
  if ! diff -Nru "${ROOT}/${path}" "${tmp}/${path}"; then
    status=1
  fi
done
if [[ ${status} -ne 0 ]]; then
  echo "Generated code is out of date: run hack/update-codegen.sh" >&2
fi
exit ${status}
