#!/usr/bin/env bash
# Makes a release into RELEASE_DIR (docs/releases.md): the images, built
# and pushed by hack/images (hack/images.sh), then the files of
# hack/release: the install bundles pinned to the images' digests, the
# kubectl plugin's archives and krew manifest, the Python SDK's wheel and
# sdist, and checksums.txt. The image archives go to <RELEASE_DIR>.images,
# outside the release's files.
#
# Usage: hack/release.sh
#
# Environment:
#   VERSION               the release, vX.Y.Z (default: git describe)
#   RELEASE_DIR           default _output/release (emptied first)
#   RELEASE_REGISTRY      registry and prefix of the images
#                         (default ghcr.io/kubeflow/mpi-operator-elastic)
#   RELEASE_PUSH          1 (default) pushes the images; 0 builds them only,
#                         the bundles still pinned to the digests a push
#                         would upload
#   RELEASE_TAGS          tags pushed (default: the version, and latest)
#   RELEASE_DOWNLOAD_URL  where the release's files are downloaded from
#                         (default: the GitHub release of VERSION)
#   SOURCE_DATE_EPOCH     every timestamp (default: the time of the HEAD commit)
#
# Reproducible: the same commit, Go toolchain, kubectl, CA bundle and
# Debian's setuptools and wheel give the same files.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
# shellcheck source=hack/lib/prereqs.sh
source hack/lib/prereqs.sh
require_python_modules

VERSION="${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"
OUT="${RELEASE_DIR:-_output/release}"
REGISTRY="${RELEASE_REGISTRY:-ghcr.io/kubeflow/mpi-operator-elastic}"
PUSH="${RELEASE_PUSH:-1}"
DOWNLOAD_URL="${RELEASE_DOWNLOAD_URL:-https://github.com/kubeflow/mpi-operator/releases/download/${VERSION}}"
SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct HEAD)}"
export VERSION SOURCE_DATE_EPOCH

start=${SECONDS}
rm -rf "${OUT}" "${OUT}.images"
mkdir -p "${OUT}"
echo "[release] ${VERSION}: images of ${REGISTRY} (push: ${PUSH})" >&2
IMAGE_REGISTRY="${REGISTRY}" IMAGE_TAGS="${RELEASE_TAGS:-${VERSION},latest}" IMAGE_PUSH="${PUSH}" \
  IMAGE_DIGESTS="${OUT}/images.txt" hack/images.sh "${OUT}.images" >/dev/null
GOTOOLCHAIN=local go run ./hack/release \
  --out "${OUT}" \
  --version "${VERSION}" \
  --commit "$(git rev-parse HEAD)" \
  --source-date-epoch "${SOURCE_DATE_EPOCH}" \
  --images "${OUT}/images.txt" \
  --download-url "${DOWNLOAD_URL}"
echo "[release] ${OUT} in $((SECONDS - start)) s:" >&2
cat "${OUT}/checksums.txt" >&2
