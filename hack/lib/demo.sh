#!/usr/bin/env bash
# Settings and helpers shared by hack/local-up.sh, hack/local-down.sh and
# hack/demo.sh: the operator, built by `make build`, runs as a local process
# next to the control plane of hack/cluster-up.sh, with its state in the same
# LOCAL_DIR.
#
# Environment (defaults in brackets):
#   LOCAL_DIR                  cluster and operator state [_output/local]
#   OPERATOR                   which operator: v1 (kubeflow.org/v1, the
#                              repository's root) or v2 (kubeflow.org/v2beta1,
#                              v2/) [v1]
#   OPERATOR_BIN               operator binary [_output/bin/mpi-operator, or
#                              _output/bin/mpi-operator-v2 for OPERATOR=v2]
#   OPERATOR_MONITORING_PORT   its /metrics and /healthz port [18080]
#   OPERATOR_ARGS              extra operator flags, split on whitespace
#   OPERATOR_START_TIMEOUT     seconds to wait for /healthz and leadership [60]
#   OPERATOR_STOP_TIMEOUT      seconds between SIGTERM and SIGKILL [30]
# shellcheck disable=SC2034  # variables are used by the scripts that source this

# local-cluster.sh gives ROOT, LOCAL_DIR, PID_DIR, KUBECONFIG_FILE and the
# PID helpers (pid_of, is_running, stop_component, strays).
# shellcheck source=hack/lib/local-cluster.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/local-cluster.sh"

# OPERATOR becomes the process name, which also names its PID file and
# log; OPERATORS are both, since local-down.sh stops either and local-up.sh
# the one it does not start. OPERATOR_OVERLAY is the install of its API.
OPERATORS=(mpi-operator mpi-operator-v2)
case "${OPERATOR:-v1}" in
  v1 | mpi-operator)
    OPERATOR=mpi-operator
    OPERATOR_OVERLAY=manifests/overlays/standalone
    ;;
  v2 | mpi-operator-v2)
    OPERATOR=mpi-operator-v2
    OPERATOR_OVERLAY=v2/manifests/overlays/standalone
    ;;
  *)
    echo "OPERATOR must be v1 or v2, not '${OPERATOR}'" >&2
    exit 2
    ;;
esac
OPERATOR_BIN="${OPERATOR_BIN:-${ROOT}/_output/bin/${OPERATOR}}"
OPERATOR_MONITORING_PORT="${OPERATOR_MONITORING_PORT:-18080}"
OPERATOR_START_TIMEOUT="${OPERATOR_START_TIMEOUT:-60}"
OPERATOR_STOP_TIMEOUT="${OPERATOR_STOP_TIMEOUT:-30}"
OPERATOR_LOG="${LOCAL_DIR}/${OPERATOR}.log"
CLUSTER_ENV="${LOCAL_DIR}/cluster.env"

# say <text>: a progress line on stdout.
say() { echo "[$(basename "$0" .sh) $(date +%H:%M:%S)] $*"; }
# die <text>: an error on stderr, exit 1.
die() {
  echo "[$(basename "$0" .sh) $(date +%H:%M:%S)] ERROR: $*" >&2
  exit 1
}

# load_cluster_env: KUBECONFIG, KUBECTL, TESTBIN_DIR and APISERVER_URL of the
# running cluster, written by hack/cluster-up.sh; KUBECONFIG is exported so
# that every kubectl below talks to that cluster and no other.
load_cluster_env() {
  [[ -f "${CLUSTER_ENV}" ]] || return 1
  local key value
  while IFS='=' read -r key value; do
    case "${key}" in
      KUBECONFIG | KUBECTL | TESTBIN_DIR | APISERVER_URL) printf -v "${key}" '%s' "${value}" ;;
    esac
  done <"${CLUSTER_ENV}"
  export KUBECONFIG
  [[ -n "${KUBECTL:-}" && -x "${KUBECTL}" && -n "${KUBECONFIG}" ]]
}

# operator_pid: the PID of the operator of this LOCAL_DIR if it is running,
# else nothing.
operator_pid() {
  local pid
  pid="$(pid_of "${OPERATOR}")"
  if is_running "${OPERATOR}" "${pid}"; then
    echo "${pid}"
  fi
}

# operator_metric <name>: the value of an unlabelled metric of the operator.
operator_metric() {
  curl -sf --max-time 2 "http://127.0.0.1:${OPERATOR_MONITORING_PORT}/metrics" |
    awk -v m="$1" '$1 == m { print $2; exit }'
}

# operator_ready: /healthz answers ok and the operator holds the leader Lease.
operator_ready() {
  [[ "$(curl -sf --max-time 2 "http://127.0.0.1:${OPERATOR_MONITORING_PORT}/healthz")" == "ok" ]] &&
    [[ "$(operator_metric mpi_operator_is_leader)" == "1" ]]
}

# operator_stop [name]: SIGTERM (a graceful stop that releases the leader
# Lease), SIGKILL after OPERATOR_STOP_TIMEOUT seconds; returns once the
# process is gone. name is a process name of OPERATORS [OPERATOR]. Also
# stops an operator of this LOCAL_DIR whose PID file was lost (recognised
# by its --kubeConfig argument inside LOCAL_DIR).
operator_stop() {
  local name="${1:-${OPERATOR}}" pid
  STOP_TIMEOUT="${OPERATOR_STOP_TIMEOUT}" stop_component "${name}"
  for pid in $(strays "${name}"); do
    mkdir -p "${PID_DIR}"
    echo "${pid}" >"${PID_DIR}/${name}.pid"
    STOP_TIMEOUT="${OPERATOR_STOP_TIMEOUT}" stop_component "${name}"
  done
}
