#!/usr/bin/env bash
# The Python SDK's tests, as `make test-sdk` runs them:
#   1. installs sdk/python offline into a virtualenv on Debian's python3
#      (_output/sdk/venv, with the system's python3-kubernetes and pytest)
#   2. runs the unit tests (sdk/python/tests/unit)
#   3. brings up a local control plane with the v1 operator running as a
#      process (hack/local-up.sh, LOCAL_DIR=_output/sdk, ports 29xxx)
#   4. runs the tests against it (sdk/python/tests/cluster)
#   5. stops the operator and the control plane, also on failure or ^C.
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

export LOCAL_DIR="${ROOT}/_output/sdk"
export ETCD_PORT=29790 ETCD_PEER_PORT=29800 APISERVER_PORT=29443
export CONTROLLER_MANAGER_PORT=29257 SCHEDULER_PORT=29259
export OPERATOR=v1 OPERATOR_MONITORING_PORT=29080 KWOK_NODES=2

say() { echo "[test-sdk $(date +%H:%M:%S)] $*"; }

# shellcheck source=hack/lib/prereqs.sh
source hack/lib/prereqs.sh
require_python_modules
start=${SECONDS}
say "installing sdk/python into ${VENV} (offline)"
rm -rf "${VENV}"
"${PYTHON}" -m venv --system-site-packages "${VENV}"
"${VENV}/bin/pip" install --quiet --no-build-isolation --no-index ./sdk/python

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
say "control plane and operator (hack/local-up.sh, LOCAL_DIR=${LOCAL_DIR#"${ROOT}/"})"
hack/local-up.sh >"${LOCAL_DIR}.local-up.log" 2>&1 || { cat "${LOCAL_DIR}.local-up.log"; exit 1; }

say "tests against the control plane"
MPIJOB_TEST_KUBECONFIG="${LOCAL_DIR}/kubeconfig" MPIJOB_TEST_OPERATOR_LOG="${LOCAL_DIR}/mpi-operator.log" \
  "${VENV}/bin/python" -m pytest -p no:cacheprovider -v sdk/python/tests/cluster "${PYTEST_EXTRA[@]}"
say "passed in $((SECONDS - start)) s"
