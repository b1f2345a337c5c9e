#!/usr/bin/env bash
# Builds the pinned developer tools into a cache outside the work tree and
# prints the path of the one asked for. Usage: hack/tools.sh golangci-lint
set -euo pipefail

GOLANGCI_LINT_VERSION=v2.15.0
CACHE=${MPI_OPERATOR_CACHE:-${HOME}/.cache/mpi-operator}/tools

install() { # name version package
  local dir="${CACHE}/$1-$2"
  if [[ ! -x "${dir}/$1" ]]; then
    echo "building $1 $2 (once; cached in ${dir})" >&2
    local start=${SECONDS}
    GOFLAGS= GOBIN="${dir}" go install "$3@$2" >&2
    echo "built $1 in $((SECONDS - start))s" >&2
  fi
  echo "${dir}/$1"
}

case "${1:-}" in
  golangci-lint) install golangci-lint "${GOLANGCI_LINT_VERSION}" github.com/golangci/golangci-lint/v2/cmd/golangci-lint ;;
  *) echo "usage: $0 golangci-lint" >&2; exit 2 ;;
esac
