#!/usr/bin/env bash
# Brings up everything a newcomer needs to try the operator on this machine,
# without Docker and without a real cluster (`make local-up` builds the
# operator first, then runs this):
#   1. the control plane binaries (hack/testbin.sh; cached after the first run)
#   2. a local control plane with KWOK_NODES simulated nodes (hack/cluster-up.sh)
#   3. the CRD, RBAC and namespace of manifests/overlays/standalone
#   4. the operator itself, _output/bin/mpi-operator, as a background process
# and prints how to point kubectl at the cluster. With OPERATOR=v2 (`make
# demo-v2`) it runs the kubeflow.org/v2beta1 operator instead:
# v2/manifests/overlays/standalone and _output/bin/mpi-operator-v2. A
# cluster that runs the other operator is stopped and started afresh: the
# MPIJobs of one API are not the other operator's, and the two installs'
# Deployment selectors differ.
#
# Pods on the simulated (kwok) nodes reach Running but run no container, so
# the Deployment of the standalone overlay is scaled to 0: the operator that
# acts on the cluster is the local process, whose log is in
# LOCAL_DIR/mpi-operator.log.
#
# Running it again is safe: what is up stays up. The operator is restarted
# when its binary changed since it started (say after a rebuild), when its
# flags changed, when the cluster under it was restarted, or when it does not
# answer.
#
# Environment: KWOK_NODES [4], KWOK_JOB_PODS_COMPLETE [false: the v2
# launcher is a batch Job's pod, which runs until ended], LOCAL_DIR and the
# ports of hack/cluster-up.sh, and the OPERATOR and OPERATOR_* settings in
# hack/lib/demo.sh (monitoring port 18080).
# hack/local-down.sh stops it all.
set -euo pipefail

# shellcheck source=hack/lib/demo.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/demo.sh"
# shellcheck source=hack/lib/prereqs.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/prereqs.sh"
require_commands curl ss setsid
read -r -a OPERATOR_EXTRA <<<"${OPERATOR_ARGS:-}"
export KWOK_NODES="${KWOK_NODES:-4}"
export KWOK_JOB_PODS_COMPLETE="${KWOK_JOB_PODS_COMPLETE:-false}"
START=${SECONDS}
cd "${ROOT}"

# step <text>: starts a timed step; done_step <text> ends it.
step_start=${SECONDS}
step() {
  say "$*"
  step_start=${SECONDS}
}
done_step() { say "  done: $* ($((SECONDS - step_start)) s)"; }

[[ -x "${OPERATOR_BIN}" ]] || die "${OPERATOR_BIN} is missing: run 'make build' (or 'make local-up', which builds it)"

# ---------------------------------------------------------------------------
step "building control plane binaries (cached after the first run, ~8 min cold)..."
hack/testbin.sh >/dev/null
done_step "binaries in $(hack/testbin.sh --print-dir)/bin"

# ---------------------------------------------------------------------------
# The API server's PID before and after tells whether cluster-up started a
# new cluster (with an empty etcd) under a running operator.
apiserver_before="$(pid_of kube-apiserver)"
step "starting the local control plane in ${LOCAL_DIR} (${KWOK_NODES} simulated nodes)"
hack/cluster-up.sh >/dev/null
apiserver_after="$(pid_of kube-apiserver)"
cluster_restarted=false
if [[ "${apiserver_before}" != "${apiserver_after}" ]]; then
  cluster_restarted=true
  done_step "control plane started"
else
  done_step "control plane was already running"
fi
load_cluster_env || die "${CLUSTER_ENV} is missing or incomplete after hack/cluster-up.sh"
kc() { "${KUBECTL}" "$@"; }

# installed_operator: the operator whose install the cluster holds, told by
# its Deployment's selector (the v2 install's has upstream's kustomize
# labels); nothing when there is none.
installed_operator() {
  local selector
  selector="$(kc -n mpi-operator get deployment mpi-operator -o jsonpath='{.spec.selector.matchLabels}' 2>/dev/null)" || return 0
  case "${selector}" in
    "") ;;
    *app.kubernetes.io/component*) echo mpi-operator-v2 ;;
    *) echo mpi-operator ;;
  esac
}
installed="$(installed_operator)"
if [[ -n "${installed}" && "${installed}" != "${OPERATOR}" ]]; then
  step "the cluster holds the install of ${installed}: starting it afresh for ${OPERATOR}"
  operator_stop "${installed}"
  hack/cluster-down.sh >/dev/null
  hack/cluster-up.sh >/dev/null
  cluster_restarted=true
  done_step "control plane started afresh"
fi

# ---------------------------------------------------------------------------
step "installing the CRD, RBAC and namespace: kubectl apply -k ${OPERATOR_OVERLAY}"
kc apply -k "${OPERATOR_OVERLAY}" | sed 's/^/    /'
# A polling loop, not `kubectl wait --for=condition=Established`: that
# fails at once ("accessor error") while the new CRD has no conditions yet.
crd_established() {
  [[ "$(kc get crd mpijobs.kubeflow.org -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null)" == "True" ]]
}
for ((i = 0; i < 300; i++)); do
  crd_established && break
  sleep 0.2
done
crd_established || die "the CRD mpijobs.kubeflow.org is not Established after 60 s"
# kubectl caches discovery for minutes: after a switch of operator, a
# cached entry would resolve mpijob to a version no longer served.
kc api-resources --api-group=kubeflow.org >/dev/null
say "  scaling Deployment mpi-operator/mpi-operator to 0: its pod would be simulated by"
say "  kwok and run no code; here the operator runs as a local process instead"
kc -n mpi-operator scale deployment/mpi-operator --replicas=0 | sed 's/^/    /'
done_step "manifests applied"

# ---------------------------------------------------------------------------
operator_start() {
  local pid
  if port_taken; then
    ss -ltnp "sport = :${OPERATOR_MONITORING_PORT}" || true
    die "port ${OPERATOR_MONITORING_PORT} is in use (see above); set OPERATOR_MONITORING_PORT to a free port"
  fi
  mkdir -p "${PID_DIR}"
  [[ -f "${OPERATOR_LOG}" ]] && mv -f "${OPERATOR_LOG}" "${OPERATOR_LOG}.prev"
  # Its own session, stdin from /dev/null, immune to the hangup of the
  # terminal: it outlives this script and `make`. setsid does not fork here
  # (a background job of a script is not a process group leader), so $! ends
  # up as the operator's own PID once the exec chain is done. KUBECONFIG is
  # set explicitly: the operator prefers it to --kubeConfig, and the caller's
  # may point at another cluster.
  KUBECONFIG="${KUBECONFIG_FILE}" setsid nohup "${OPERATOR_BIN}" "${OPERATOR_FLAGS[@]}" \
    </dev/null >"${OPERATOR_LOG}" 2>&1 &
  pid=$!
  echo "${pid}" >"${PID_DIR}/${OPERATOR}.pid"

  local deadline=$((SECONDS + OPERATOR_START_TIMEOUT)) i
  for ((i = 0; i < 50; i++)); do # the exec chain: a few milliseconds
    is_running "${OPERATOR}" "${pid}" && break
    [[ -e "/proc/${pid}" ]] || break
    sleep 0.05
  done
  until operator_ready; do
    if ! is_running "${OPERATOR}" "${pid}"; then
      say "  the operator exited; last lines of ${OPERATOR_LOG}:"
      tail -n 30 "${OPERATOR_LOG}" | sed 's/^/    /'
      rm -f "${PID_DIR}/${OPERATOR}.pid"
      die "the operator did not start"
    fi
    if ((SECONDS >= deadline)); then
      say "  no answer after ${OPERATOR_START_TIMEOUT} s (/healthz ok and mpi_operator_is_leader 1 expected); last lines of ${OPERATOR_LOG}:"
      tail -n 30 "${OPERATOR_LOG}" | sed 's/^/    /'
      operator_stop
      die "the operator did not become ready"
    fi
    sleep 0.3
  done
}

OPERATOR_FLAGS=(--kubeConfig "${KUBECONFIG_FILE}" --monitoring-port "${OPERATOR_MONITORING_PORT}" -v=2 "${OPERATOR_EXTRA[@]}")

# same_flags <pid>: the process runs with exactly OPERATOR_FLAGS.
same_flags() {
  local -a argv=()
  mapfile -d '' -t argv <"/proc/$1/cmdline" 2>/dev/null || return 1
  [[ "${argv[*]:1}" == "${OPERATOR_FLAGS[*]}" ]]
}

# port_taken [pid]: something other than process pid listens on the
# monitoring port.
port_taken() {
  (: <"/dev/tcp/127.0.0.1/${OPERATOR_MONITORING_PORT}") 2>/dev/null || return 1
  [[ -n "${1:-}" ]] && ss -Hltnp "sport = :${OPERATOR_MONITORING_PORT}" | grep -q "pid=$1," && return 1
  return 0
}

for other in "${OPERATORS[@]}"; do
  if [[ "${other}" != "${OPERATOR}" && -n "$(OPERATOR="${other}" operator_pid)" ]]; then
    step "stopping ${other}: ${OPERATOR} runs instead"
    operator_stop "${other}"
  fi
done

pid="$(operator_pid)"
if port_taken "${pid}"; then
  ss -ltnp "sport = :${OPERATOR_MONITORING_PORT}" || true
  die "port ${OPERATOR_MONITORING_PORT} is in use by another process (see above); set OPERATOR_MONITORING_PORT to a free port"
fi
restart_reason=""
if [[ -z "${pid}" ]]; then
  operator_stop # an operator of this LOCAL_DIR that lost its PID file
elif ${cluster_restarted}; then
  restart_reason="the cluster under it was restarted"
elif ! cmp -s "/proc/${pid}/exe" "${OPERATOR_BIN}"; then
  restart_reason="${OPERATOR_BIN} changed since it started"
elif ! same_flags "${pid}"; then
  restart_reason="its flags differ from: ${OPERATOR_FLAGS[*]}"
elif ! operator_ready; then
  restart_reason="it does not answer on port ${OPERATOR_MONITORING_PORT} as the leader"
fi

all_up=false
if [[ -n "${pid}" && -z "${restart_reason}" ]]; then
  step "the operator is already running (pid ${pid}, binary unchanged, leader)"
  ${cluster_restarted} || all_up=true
else
  if [[ -n "${restart_reason}" ]]; then
    step "restarting the operator (pid ${pid}): ${restart_reason}"
    operator_stop
  else
    step "starting the operator: ${OPERATOR_BIN#"${ROOT}/"} ${OPERATOR_FLAGS[*]}"
  fi
  operator_start
  done_step "operator running (pid $(operator_pid)), /healthz ok, leader"
fi

# ---------------------------------------------------------------------------
kubectl_dir="$(dirname "${KUBECTL}")"
example=examples/v1/elastic/tensorflow-mnist-elastic.yaml demo="make demo"
if [[ "${OPERATOR}" == mpi-operator-v2 ]]; then
  example=examples/v2beta1/elastic/tensorflow-mnist-elastic.yaml demo="make demo-v2"
fi
if ${all_up}; then
  headline="Everything was already running; nothing to do ($((SECONDS - START)) s)."
else
  headline="Local cluster and operator are up ($((SECONDS - START)) s)."
fi
cat <<EOF

${headline}
  API server:  ${APISERVER_URL} (${KWOK_NODES} simulated kwok nodes; pods reach Running but run nothing)
  operator:    pid $(operator_pid), log ${OPERATOR_LOG#"${ROOT}/"}
               metrics http://127.0.0.1:${OPERATOR_MONITORING_PORT}/metrics
  cluster logs: ${LOCAL_DIR#"${ROOT}/"}/<component>.log

Point your shell at it (use this kubectl ${KUBE_VERSION}, not the one already on your PATH):
  export KUBECONFIG=${KUBECONFIG}
  export PATH=${kubectl_dir}:\$PATH      # or: alias kubectl=${KUBECTL}

Then try:
  kubectl create -f ${example}
  kubectl get mpijobs
  kubectl scale mpijob/tensorflow-mnist-elastic --replicas=4

'${demo}' walks through an elastic job step by step; 'make local-down' stops everything.
EOF
