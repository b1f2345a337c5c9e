#!/usr/bin/env bash
# Builds the project's container images as archives, without a container
# engine (hack/images, with go-containerregistry): for each of mpi-operator,
# mpi-operator-v2 and kubectl-delivery,
#   <out>/<name>.tar                 linux/amd64 and linux/arm64: an OCI image
#                                    layout with a multi-platform index
#   <out>/<name>-linux-<arch>.tar    one platform: an OCI image layout that
#                                    also holds docker load's manifest.json
# Each archive names the image ${IMAGE_REGISTRY}/<name> with each tag of
# IMAGE_TAGS. stdout lists "<digest>  <file>  <first name>" per archive.
#
# Usage: hack/images.sh [<out dir>]   (default _output/images)
#
# Environment:
#   IMAGE_REGISTRY     registry and prefix (default ghcr.io/kubeflow/mpi-operator-elastic)
#   IMAGE_TAGS         comma-separated tags (default: the version, and latest)
#   VERSION            version stamped in binaries and labels (default: git describe)
#   SOURCE_DATE_EPOCH  every timestamp (default: the time of the HEAD commit)
#   IMAGE_PLATFORMS    default "linux/amd64 linux/arm64"
#   CA_BUNDLE          default /etc/ssl/certs/ca-certificates.crt (Debian's ca-certificates)
#   IMAGE_PUSH         1: also push each multi-platform image to IMAGE_REGISTRY
#                      with every tag (credentials of ~/.docker/config.json)
#   IMAGE_DIGESTS      file to write <registry>/<name>@<index digest> into,
#                      one line per image (hack/release.sh pins to them)
#
# Reproducible: the same commit, Go toolchain, kubectl (hack/kubectl.sh,
# cached) and CA bundle give byte-identical archives.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
OUT="${1:-_output/images}"
VERSION="${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"
COMMIT="$(git rev-parse HEAD)"
SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct HEAD)}"
PLATFORMS="${IMAGE_PLATFORMS:-linux/amd64 linux/arm64}"
CA_BUNDLE="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
if [[ ! -s "${CA_BUNDLE}" ]]; then
  echo "error: no CA bundle at ${CA_BUNDLE}: apt-get install -y ca-certificates, or run hack/install-prereqs.sh" >&2
  exit 1
fi

args=(--out "${OUT}" --tags "${IMAGE_TAGS:-${VERSION},latest}")
[[ -n "${IMAGE_REGISTRY:-}" ]] && args+=(--registry "${IMAGE_REGISTRY}")
[[ "${IMAGE_PUSH:-}" == 1 ]] && args+=(--push)
[[ -n "${IMAGE_DIGESTS:-}" ]] && args+=(--digests "${IMAGE_DIGESTS}")

start=${SECONDS}
kubectl_dir="$(KUBECTL_PLATFORMS="${PLATFORMS}" hack/kubectl.sh)"
GOTOOLCHAIN=local go run ./hack/images "${args[@]}" \
  --version "${VERSION}" \
  --commit "${COMMIT}" \
  --source-date-epoch "${SOURCE_DATE_EPOCH}" \
  --kubectl-dir "${kubectl_dir}" \
  --ca-bundle "${CA_BUNDLE}" \
  --platforms "${PLATFORMS// /,}"
echo "[images] done in $((SECONDS - start)) s" >&2
