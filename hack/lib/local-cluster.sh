#!/usr/bin/env bash
# Settings and helpers shared by hack/cluster-up.sh and hack/cluster-down.sh.
# Every setting can be overridden from the environment; see cluster-up.sh.
# shellcheck disable=SC2034  # variables are used by the scripts that source this

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=hack/lib/versions.sh
source "${ROOT}/hack/lib/versions.sh"

LOCAL_DIR="${LOCAL_DIR:-${ROOT}/_output/local}"
mkdir -p "${LOCAL_DIR}"
LOCAL_DIR="$(cd "${LOCAL_DIR}" && pwd)"
PID_DIR="${LOCAL_DIR}/pids"
PKI_DIR="${LOCAL_DIR}/pki"
KUBECONFIG_FILE="${LOCAL_DIR}/kubeconfig"

ETCD_PORT="${ETCD_PORT:-2379}"
ETCD_PEER_PORT="${ETCD_PEER_PORT:-2380}"
APISERVER_PORT="${APISERVER_PORT:-6443}"
CONTROLLER_MANAGER_PORT="${CONTROLLER_MANAGER_PORT:-10257}"
SCHEDULER_PORT="${SCHEDULER_PORT:-10259}"
STOP_TIMEOUT="${STOP_TIMEOUT:-30}"

# In start order; stopped in reverse order.
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

log() { echo "[$(basename "$0") $(date +%H:%M:%S)] $*" >&2; }

# pid_of <name>: the PID recorded for a component, or nothing.
pid_of() {
  local f="${PID_DIR}/$1.pid"
  [[ -f "${f}" ]] && tr -dc '0-9' <"${f}"
  return 0
}

# is_running <name> <pid>: the PID is alive, not a zombie, and is that
# component (PIDs get reused: never signal a stranger).
is_running() {
  local name="$1" pid="$2" stat
  local -a argv=()
  [[ -n "${pid}" ]] || return 1
  # No pipelines here: with pipefail, an early-exiting reader would turn a
  # match into a failure.
  read -r stat 2>/dev/null <"/proc/${pid}/stat" || return 1
  stat="${stat##*) }" # the state letter follows "(comm) "
  [[ "${stat:0:1}" != "Z" && "${stat:0:1}" != "X" ]] || return 1
  mapfile -d '' -t argv <"/proc/${pid}/cmdline" 2>/dev/null || return 1
  [[ ${#argv[@]} -gt 0 && "${argv[0]##*/}" == "${name}" ]]
}

# stop_component <name>: SIGTERM, wait up to STOP_TIMEOUT seconds, then
# SIGKILL; returns once the process is gone (so its ports are free) and
# removes the PID file.
stop_component() {
  local name="$1" pid i
  pid="$(pid_of "${name}")"
  if [[ -z "${pid}" ]]; then
    rm -f "${PID_DIR}/${name}.pid"
    return 0
  fi
  if is_running "${name}" "${pid}"; then
    log "stopping ${name} (pid ${pid})"
    kill -TERM "${pid}" 2>/dev/null || true
    for ((i = 0; i < STOP_TIMEOUT * 10; i++)); do
      is_running "${name}" "${pid}" || break
      sleep 0.1
    done
    if is_running "${name}" "${pid}"; then
      log "${name} (pid ${pid}) still running after ${STOP_TIMEOUT} s: SIGKILL"
      kill -KILL "${pid}" 2>/dev/null || true
      while is_running "${name}" "${pid}"; do sleep 0.1; done
    fi
    STOPPED_PIDS+=("${pid}")
  fi
  rm -f "${PID_DIR}/${name}.pid"
}

# strays <name>: PIDs of that component that belong to this LOCAL_DIR (an
# argument names a file in it) but whose PID file is gone, e.g. after a
# start-up that was killed before it wrote the file.
strays() {
  local name="$1" d pid arg
  local -a argv
  for d in /proc/[0-9]*; do
    pid="${d#/proc/}"
    is_running "${name}" "${pid}" || continue
    argv=()
    mapfile -d '' -t argv <"${d}/cmdline" 2>/dev/null || continue
    for arg in "${argv[@]}"; do
      if [[ "${arg}" == *"${LOCAL_DIR}/"* ]]; then
        echo "${pid}"
        break
      fi
    done
  done
}

# stop_all: every component of the cluster in LOCAL_DIR, in reverse start
# order, recorded or stray.
STOPPED_PIDS=()
stop_all() {
  local i name pid
  for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do
    name="${COMPONENTS[i]}"
    stop_component "${name}"
    for pid in $(strays "${name}"); do
      mkdir -p "${PID_DIR}"
      echo "${pid}" >"${PID_DIR}/${name}.pid"
      stop_component "${name}"
    done
  done
  # All have exited (their ports are free). An orphan stays a zombie until
  # whoever adopted it reaps it, which init here does only every second or
  # two: wait a little for that too, so that ps shows nothing left.
  local left
  for ((i = 0; i < 50; i++)); do
    left=false
    for pid in "${STOPPED_PIDS[@]}"; do
      if [[ -e "/proc/${pid}" ]]; then
        left=true
        break
      fi
    done
    ${left} || break
    sleep 0.1
  done
}
