#!/usr/bin/env bash
# The Python SDK's tests, as `make test-sdk` runs them:
#   1. installs sdk/python offline into a virtualenv on Debian's python3
#      (_output/sdk/venv, with the system's python3-kubernetes and pytest)
#   2. runs the unit tests (sdk/python/tests/unit)
#   3. brings up a local control plane with the v1 operator running as a
#      process (hack/local-up.sh, LOCAL_DIR=_output/sdk, free ports) and
#      kwok serving the pods' logs (KWOK_SERVER_PORT)
#   4. runs the tests against it (sdk/python/tests/cluster)
#   5. the same with the v2beta1 operator (OPERATOR=v2 hack/local-up.sh
#      starts the control plane afresh with the v2 install) and
#      sdk/python/tests/cluster_v2
#   6. stops the operator and the control plane, also on failure or ^C.
# The installed package is what the tests import, not the source tree.
#
# Environment: SDK_TEST_PYTEST_ARGS (extra pytest arguments, split on
# whitespace), SDK_TEST_KEEP=1 leaves the cluster up afterwards.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "${ROOT}"
PYTHON=/usr/bin/python3 # Debian's, with its python3-* packages
VENV=_output/sdk/venv
read -r -a PYTEST_EXTRA <<<"${SDK_TEST_PYTEST_ARGS:-}"

export LOCAL_DIR="${ROOT}/_output/sdk" KWOK_NODES=2
# Free ports, claimed for this script's run where the Go suites claim
# theirs (test/harness); kwok serves the pods' logs (kwok Logs objects).
read -r ETCD_PORT ETCD_PEER_PORT APISERVER_PORT CONTROLLER_MANAGER_PORT SCHEDULER_PORT \
  OPERATOR_MONITORING_PORT KWOK_SERVER_PORT < <(go run ./hack/freeports --for $$ 7)
[[ -n "${KWOK_SERVER_PORT}" ]] || { echo "hack/freeports printed no ports" >&2; exit 1; }
export ETCD_PORT ETCD_PEER_PORT APISERVER_PORT CONTROLLER_MANAGER_PORT SCHEDULER_PORT \
  OPERATOR_MONITORING_PORT KWOK_SERVER_PORT

say() { echo "[test-sdk $(date +%H:%M:%S)] $*"; }

# shellcheck source=hack/lib/prereqs.sh
source hack/lib/prereqs.sh
require_python_modules
start=${SECONDS}
say "installing sdk/python into ${VENV} (offline)"
rm -rf "${VENV}" sdk/python/build # setuptools' build/lib could keep files since deleted
"${PYTHON}" -m venv --system-site-packages "${VENV}"
"${VENV}/bin/pip" install --quiet --no-build-isolation --no-index ./sdk/python
rm -rf sdk/python/build

say "unit tests"
"${VENV}/bin/python" -m pytest -p no:cacheprovider -q sdk/python/tests/unit "${PYTEST_EXTRA[@]}"

down() {
  if [[ "${SDK_TEST_KEEP:-}" == 1 ]]; then
    say "SDK_TEST_KEEP=1: leaving the cluster up; stop it with LOCAL_DIR=${LOCAL_DIR} hack/local-down.sh"
    return
  fi
  say "stopping the operator and the control plane"
  hack/local-down.sh >/dev/null || true
}
trap down EXIT
trap 'exit 130' INT TERM # so that the EXIT trap runs on a signal too
# cluster_tests <operator> <tests>: the operator on the control plane, then
# the tests against it.
cluster_tests() {
  say "control plane and the ${1} operator (OPERATOR=${1} hack/local-up.sh, LOCAL_DIR=${LOCAL_DIR#"${ROOT}/"})"
  OPERATOR="${1}" hack/local-up.sh >"${LOCAL_DIR}.local-up.log" 2>&1 || { cat "${LOCAL_DIR}.local-up.log"; exit 1; }
  say "tests against the control plane: ${2}"
  MPIJOB_TEST_KUBECONFIG="${LOCAL_DIR}/kubeconfig" \
    "${VENV}/bin/python" -m pytest -p no:cacheprovider -v "${2}" "${PYTEST_EXTRA[@]}"
}
cluster_tests v1 sdk/python/tests/cluster
cluster_tests v2 sdk/python/tests/cluster_v2
say "passed in $((SECONDS - start)) s"
