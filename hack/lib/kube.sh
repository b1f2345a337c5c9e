#!/usr/bin/env bash
# Sourced by the scripts that build Kubernetes binaries from the Go module
# proxy (hack/testbin.sh, hack/kubectl.sh), after hack/lib/versions.sh and
# hack/lib/buildcache.sh (cache_begin must have set WORK).
# shellcheck disable=SC2034  # KUBE_MODDIR and KUBE_XFLAGS are the caller's

KUBE_MODDIR=""
# prepare_kube_module: one throw-away module under WORK for all Kubernetes
# binaries, in KUBE_MODDIR. It requires k8s.io/kubernetes and replaces each
# staging module (which Kubernetes' own go.mod points at ./staging/src/...)
# with its published version.
prepare_kube_module() {
  [[ -n "${KUBE_MODDIR}" ]] && return 0
  local gomod
  gomod="$(mod_json_field "k8s.io/kubernetes@${KUBE_VERSION}" GoMod)"
  [[ -f "${gomod}" ]] || { echo "cannot find go.mod of k8s.io/kubernetes@${KUBE_VERSION}" >&2; return 1; }

  # Lines look like "k8s.io/api => ./staging/src/k8s.io/api", inside a
  # replace ( ... ) block or after a single-line "replace".
  local staging
  staging="$(sed -n -E 's#^[[:space:]]*(replace[[:space:]]+)?(k8s\.io/[^[:space:]]+)[[:space:]]+=>[[:space:]]+\./staging/.*#\2#p' "${gomod}" | sort -u)"
  [[ -n "${staging}" ]] || { echo "no staging replacements found in ${gomod}" >&2; return 1; }
  local govers
  govers="$(sed -n -E 's/^go[[:space:]]+([0-9.]+)[[:space:]]*$/\1/p' "${gomod}")"

  KUBE_MODDIR="${WORK}/kube"
  mkdir -p "${KUBE_MODDIR}"
  {
    echo "module testbin/kube"
    echo
    echo "go ${govers:-1.25.0}"
    echo
    echo "require k8s.io/kubernetes ${KUBE_VERSION}"
    echo
    echo "replace ("
    local m
    for m in ${staging}; do
      echo "	${m} => ${m} ${KUBE_STAGING_VERSION}"
    done
    echo ")"
  } >"${KUBE_MODDIR}/go.mod"
}

# kube_version_xflags <build date>: sets KUBE_XFLAGS to the -X assignments
# (without -X) of the version variables Kubernetes' own build
# (hack/lib/version.sh) sets; without them the binaries call themselves
# v0.0.0-master.
kube_version_xflags() {
  local date="$1" major minor p
  major="${KUBE_VERSION#v}"; major="${major%%.*}"
  minor="${KUBE_VERSION#v*.}"; minor="${minor%%.*}"
  KUBE_XFLAGS=()
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    KUBE_XFLAGS+=("${p}.gitVersion=${KUBE_VERSION}" "${p}.gitMajor=${major}" "${p}.gitMinor=${minor}"
      "${p}.gitTreeState=clean" "${p}.buildDate=${date}")
  done
}
