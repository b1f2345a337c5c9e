#!/usr/bin/env bash
# Starts a local Kubernetes control plane on 127.0.0.1, built from source by
# hack/testbin.sh: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, and kwok simulating KWOK_NODES nodes. No container runs:
# kwok moves pods on its nodes from Pending to Running, and deletes pods
# once they carry a deletionTimestamp.
#
# Use it:
#   hack/cluster-up.sh
#   KUBECTL="$(hack/testbin.sh --print-dir)/bin/kubectl"   # the pinned client
#   "${KUBECTL}" --kubeconfig _output/local/kubeconfig get nodes
#   hack/cluster-down.sh
# Progress goes to stderr; stdout gets one line, the admin kubeconfig's path.
# _output/local/cluster.env holds KUBECONFIG, KUBECTL, TESTBIN_DIR,
# APISERVER_URL and KUBE_VERSION as sourceable KEY=value lines.
#
# Finishing a simulated pod: of kwok's pod/fast stages, "pod-ready" acts only
# on Pending pods, "pod-complete" only on Running pods owned by a Job, and
# "pod-delete" only on pods being deleted; a pod in phase Succeeded or Failed
# is never touched again. So a test ends a pod by writing its status through
# the status subresource, and it stays (checked: unchanged 45 s later). Note
# that the API server itself does NOT refuse a later patch back to Running.
#   "${KUBECTL}" patch pod NAME --subresource=status --type=merge -p \
#     '{"status":{"phase":"Succeeded"}}'          # or "Failed"
# To make it look like a real exit, also set the container state, e.g.
#   -p '{"status":{"phase":"Failed","containerStatuses":[{"name":"C",
#        "image":"IMG","imageID":"","ready":false,"restartCount":0,
#        "state":{"terminated":{"exitCode":1,"reason":"Error"}}}]}}'
# (a merge patch replaces the whole containerStatuses list; with client-go use
# Pods(ns).UpdateStatus or Patch(..., "status")).
# Caveat: the stock pod/fast stages include "pod-complete", which turns a
# Running pod owned by a batch Job into Succeeded at once. Set
# KWOK_JOB_PODS_COMPLETE=false to leave Job pods Running until a test ends them.
#
# kubectl exec and logs of simulated pods (opt-in: KWOK_SERVER_PORT=<port>).
# kwok then serves the kubelet API of its nodes on KWOK_NODE_IP:<port> with
# a certificate of the local CA, its nodes publish that port as their
# kubelet endpoint, and the API server dials it for pods/exec and pods/log.
# What an exec runs and what logs return is told by kwok.x-k8s.io/v1alpha1
# objects that this script's CRDs (hack/lib/kwok-debugging-crds.yaml) let
# you create: an Exec named after a pod (or a ClusterExec selecting pods)
# runs the exec'd command as a local process of kwok's, as root, with the
# working directory and environment it gives; a Logs (or ClusterLogs) names
# the file that `kubectl logs` returns, in the CRI log format a kubelet reads
# ("<RFC 3339 time> stdout|stderr F <line>" per line; kwok refuses other
# lines). There is no default ClusterExec (an exec with no object fails); a
# ClusterLogs named "default" returns the empty LOCAL_DIR/kwok-logs/empty.log
# for every pod that has no Logs of its own. A cluster already up keeps the
# setting it was started with (hack/cluster-down.sh first to change it).
#   KWOK_SERVER_PORT=31250 hack/cluster-up.sh
#   "${KUBECTL}" apply -f - <<EOF
#   apiVersion: kwok.x-k8s.io/v1alpha1
#   kind: Exec
#   metadata: {name: POD, namespace: NS}
#   spec: {execs: [{local: {workDir: /tmp/POD, envs: [{name: K, value: V}]}}]}
#   EOF
#   "${KUBECTL}" exec -n NS POD -- sh -c 'pwd; echo $K'   # /tmp/POD, V
#
# Environment (defaults in brackets):
#   LOCAL_DIR                  state, logs, PID files, kubeconfig [_output/local]
#   ETCD_PORT, ETCD_PEER_PORT  etcd client and peer ports [2379, 2380]
#   APISERVER_PORT             kube-apiserver secure port [6443]
#   CONTROLLER_MANAGER_PORT    kube-controller-manager secure port [10257]
#   SCHEDULER_PORT             kube-scheduler secure port [10259]
#     (a second cluster needs its own LOCAL_DIR and all five ports)
#   SERVICE_CLUSTER_IP_RANGE   [10.96.0.0/16]
#   KWOK_NODES                 number of simulated nodes [2]
#   KWOK_NODE_PREFIX           node names are <prefix><i> [kwok-node-]
#   KWOK_NODE_CPU, KWOK_NODE_MEMORY, KWOK_NODE_PODS, KWOK_NODE_GPUS
#   KWOK_NODE_EPHEMERAL_STORAGE  capacity of each node
#                              [32, 256Gi, 110, 8, 1Ti]; KWOK_NODE_GPUS=0 leaves
#                              nvidia.com/gpu out
#   KWOK_POD_CIDR              pod IPs kwok hands out [10.244.0.1/16]
#   KWOK_NODE_IP               InternalIP of the simulated nodes [127.0.0.1]
#   KWOK_JOB_PODS_COMPLETE     keep kwok's pod-complete stage [true]
#   KWOK_SERVER_PORT           kwok's kubelet API port; empty turns exec and
#                              logs off [empty] (see "kubectl exec and logs" above)
#   KUBE_LOG_LEVEL             --v of the Kubernetes components [1]
#   APISERVER_EXTRA_ARGS, CONTROLLER_MANAGER_EXTRA_ARGS, SCHEDULER_EXTRA_ARGS,
#   KWOK_EXTRA_ARGS            extra flags, split on whitespace
#   CLUSTER_UP_TIMEOUT         seconds to wait for each readiness step [120]
#   KEEP_ON_FAILURE=1          leave the processes running when start-up fails
#   STOP_TIMEOUT               seconds between SIGTERM and SIGKILL [30]
#   MPI_OPERATOR_TESTBIN       binary cache directory (see hack/testbin.sh)
#   MPI_OPERATOR_KUBE_VERSION  a Kubernetes version of KUBE_COMPAT_VERSIONS in
#                              hack/lib/versions.sh instead of the pinned
#                              KUBE_VERSION [empty] (make test-compat)
#
# If the cluster in LOCAL_DIR is already up (every recorded PID alive, the
# API server ready, and of the Kubernetes version asked for) this says so
# and exits 0. Otherwise it stops whatever is
# left of it and starts afresh with an empty etcd. Certificates and keys in
# LOCAL_DIR/pki are generated once and kept.
set -euo pipefail

# shellcheck source=hack/lib/local-cluster.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/local-cluster.sh"
# shellcheck source=hack/lib/prereqs.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/prereqs.sh"
require_commands curl openssl setsid flock

SERVICE_CLUSTER_IP_RANGE="${SERVICE_CLUSTER_IP_RANGE:-10.96.0.0/16}"
KWOK_NODES="${KWOK_NODES:-2}"
KWOK_NODE_PREFIX="${KWOK_NODE_PREFIX:-kwok-node-}"
KWOK_NODE_CPU="${KWOK_NODE_CPU:-32}"
KWOK_NODE_MEMORY="${KWOK_NODE_MEMORY:-256Gi}"
KWOK_NODE_PODS="${KWOK_NODE_PODS:-110}"
KWOK_NODE_GPUS="${KWOK_NODE_GPUS:-8}"
KWOK_NODE_EPHEMERAL_STORAGE="${KWOK_NODE_EPHEMERAL_STORAGE:-1Ti}"
KWOK_POD_CIDR="${KWOK_POD_CIDR:-10.244.0.1/16}"
KWOK_NODE_IP="${KWOK_NODE_IP:-127.0.0.1}"
KWOK_JOB_PODS_COMPLETE="${KWOK_JOB_PODS_COMPLETE:-true}"
KWOK_SERVER_PORT="${KWOK_SERVER_PORT:-}"
KUBE_LOG_LEVEL="${KUBE_LOG_LEVEL:-1}"
CLUSTER_UP_TIMEOUT="${CLUSTER_UP_TIMEOUT:-120}"
read -r -a APISERVER_EXTRA <<<"${APISERVER_EXTRA_ARGS:-}"
read -r -a CONTROLLER_MANAGER_EXTRA <<<"${CONTROLLER_MANAGER_EXTRA_ARGS:-}"
read -r -a SCHEDULER_EXTRA <<<"${SCHEDULER_EXTRA_ARGS:-}"
read -r -a KWOK_EXTRA <<<"${KWOK_EXTRA_ARGS:-}"

APISERVER_URL="https://127.0.0.1:${APISERVER_PORT}"
KUBECONFIG_DIR="${LOCAL_DIR}/kubeconfigs"
START=${SECONDS}
STARTED=()

step_start=${SECONDS}
step() {
  log "$* (+$((SECONDS - step_start)) s)"
  step_start=${SECONDS}
}

# curl against the API server as cluster admin.
api_get() {
  curl -sf --max-time 5 --cacert "${PKI_DIR}/ca.crt" \
    --cert "${PKI_DIR}/admin.crt" --key "${PKI_DIR}/admin.key" "${APISERVER_URL}$1"
}

kc() { "${KUBECTL}" --kubeconfig "${KUBECONFIG_FILE}" "$@"; }

# ---------------------------------------------------------------------------
# Already up?
all_running=true
any_recorded=false
for c in "${COMPONENTS[@]}"; do
  pid="$(pid_of "${c}")"
  [[ -n "${pid}" ]] && any_recorded=true
  is_running "${c}" "${pid}" || all_running=false
done
# The version it runs, as its cluster.env records it; a cluster.env without
# one was written before versions could be chosen, so the pinned one runs.
running_version="$(sed -n 's/^KUBE_VERSION=//p' "${LOCAL_DIR}/cluster.env" 2>/dev/null || true)"
same_version=false
if [[ "${running_version}" == "${KUBE_VERSION}" || (-z "${running_version}" && -z "${MPI_OPERATOR_KUBE_VERSION:-}") ]]; then
  same_version=true
fi
if ${all_running} && ${same_version} &&
  [[ -f "${PKI_DIR}/admin.crt" ]] && [[ "$(api_get /readyz 2>/dev/null)" == "ok" ]]; then
  log "cluster in ${LOCAL_DIR} is already running: ${APISERVER_URL}, kubeconfig ${KUBECONFIG_FILE}"
  echo "${KUBECONFIG_FILE}"
  exit 0
fi
if ${any_recorded}; then
  log "cluster in ${LOCAL_DIR} is partly running or stale: stopping what is left of it"
  stop_all
fi

# ---------------------------------------------------------------------------
# Binaries (the commands are checked at the top).
TESTBIN_DIR="$("${ROOT}/hack/testbin.sh" | tail -n1)"
BIN="${TESTBIN_DIR}/bin"
KUBECTL="${BIN}/kubectl"
step "binaries in ${BIN}"

# Refuse to start next to something already listening on our ports: our
# process would die on bind, or worse, we would talk to someone else's.
for port in "${ETCD_PORT}" "${ETCD_PEER_PORT}" "${APISERVER_PORT}" "${CONTROLLER_MANAGER_PORT}" "${SCHEDULER_PORT}" ${KWOK_SERVER_PORT}; do
  if (: <"/dev/tcp/127.0.0.1/${port}") 2>/dev/null; then
    log "port ${port} on 127.0.0.1 is already in use:"
    ss -ltnp "sport = :${port}" >&2 || true
    exit 1
  fi
done
# A port inside the kernel's ephemeral range may be taken at any moment by
# an outgoing connection (the check above cannot see those); say so, since
# the bind failure it causes later names no culprit.
if read -r eph_lo eph_hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null; then
  for port in "${ETCD_PORT}" "${ETCD_PEER_PORT}" "${APISERVER_PORT}" "${CONTROLLER_MANAGER_PORT}" "${SCHEDULER_PORT}" ${KWOK_SERVER_PORT}; do
    if ((port >= eph_lo && port <= eph_hi)); then
      log "warning: port ${port} is in the ephemeral range ${eph_lo}-${eph_hi}; an outgoing connection may hold it"
    fi
  done
fi

# ---------------------------------------------------------------------------
# On failure: show the end of each log and stop what we started.
on_exit() {
  local rc=$?
  [[ ${rc} -eq 0 ]] && return 0
  log "start-up failed (exit ${rc})"
  local c
  for c in "${STARTED[@]}"; do
    echo "----- tail of ${LOCAL_DIR}/${c}.log" >&2
    tail -n 15 "${LOCAL_DIR}/${c}.log" >&2 || true
  done
  if [[ "${KEEP_ON_FAILURE:-}" == "1" ]]; then
    log "KEEP_ON_FAILURE=1: leaving the processes running; hack/cluster-down.sh stops them"
  else
    stop_all
  fi
  exit "${rc}"
}
trap on_exit EXIT

# ---------------------------------------------------------------------------
# Certificates and keys (kept across restarts).

# First address of the service range: the kubernetes Service's ClusterIP,
# which must be in the serving certificate (IPv4 ranges only).
first_service_ip() {
  local net="${1%/*}" a b c d
  IFS=. read -r a b c d <<<"${net}"
  echo "${a}.${b}.${c}.$((d + 1))"
}
KUBERNETES_SERVICE_IP="$(first_service_ip "${SERVICE_CLUSTER_IP_RANGE}")"

# gen_cert <name> <subject> <client|server>: a key and a certificate signed by
# the CA (or by ${CA_NAME}.crt when CA_NAME is set).
gen_cert() {
  local name="$1" subject="$2" profile="$3" ca="${CA_NAME:-ca}"
  openssl req -new -newkey rsa:2048 -nodes -config "${PKI_DIR}/openssl.cnf" \
    -keyout "${PKI_DIR}/${name}.key" -out "${PKI_DIR}/${name}.csr" -subj "${subject}" 2>/dev/null
  openssl x509 -req -in "${PKI_DIR}/${name}.csr" -CA "${PKI_DIR}/${ca}.crt" -CAkey "${PKI_DIR}/${ca}.key" \
    -set_serial "0x$(openssl rand -hex 16)" -days 3650 -sha256 \
    -extfile "${PKI_DIR}/openssl.cnf" -extensions "${profile}" -out "${PKI_DIR}/${name}.crt" 2>/dev/null
  rm -f "${PKI_DIR}/${name}.csr"
}

generate_pki() {
  rm -rf "${PKI_DIR}"
  mkdir -p "${PKI_DIR}"
  chmod 700 "${PKI_DIR}"
  cat >"${PKI_DIR}/openssl.cnf" <<EOF
[req]
distinguished_name = dn
prompt = no
[dn]
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, digitalSignature, keyEncipherment, keyCertSign
subjectKeyIdentifier = hash
[client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost, DNS:kubernetes, DNS:kubernetes.default, DNS:kubernetes.default.svc, DNS:kubernetes.default.svc.cluster.local, IP:127.0.0.1, IP:${KUBERNETES_SERVICE_IP}
EOF
  openssl req -x509 -new -newkey rsa:2048 -nodes -config "${PKI_DIR}/openssl.cnf" -extensions ca \
    -keyout "${PKI_DIR}/ca.key" -out "${PKI_DIR}/ca.crt" -days 3650 -sha256 \
    -subj "/CN=mpi-operator-local-ca" 2>/dev/null
  gen_cert apiserver "/CN=kube-apiserver" server
  # Front proxy (aggregation layer), a CA of its own as in kubeadm.
  openssl req -x509 -new -newkey rsa:2048 -nodes -config "${PKI_DIR}/openssl.cnf" -extensions ca \
    -keyout "${PKI_DIR}/front-proxy-ca.key" -out "${PKI_DIR}/front-proxy-ca.crt" -days 3650 -sha256 \
    -subj "/CN=mpi-operator-local-front-proxy-ca" 2>/dev/null
  CA_NAME=front-proxy-ca gen_cert front-proxy-client "/CN=front-proxy-client" client
  gen_cert admin "/O=system:masters/CN=kubernetes-admin" client
  gen_cert kube-controller-manager "/CN=system:kube-controller-manager" client
  gen_cert kube-scheduler "/CN=system:kube-scheduler" client
  # kwok plays every kubelet at once, so it cannot be a single system:node:<name>.
  gen_cert kwok "/O=system:masters/CN=kwok-controller" client
  # Service account token signing key.
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "${PKI_DIR}/sa.key" 2>/dev/null
  openssl pkey -in "${PKI_DIR}/sa.key" -pubout -out "${PKI_DIR}/sa.pub"
  echo "${PKI_STAMP}" >"${PKI_DIR}/.complete"
}

# Regenerate when missing, or when what goes into the certificates changed.
PKI_STAMP="v2 ${KUBERNETES_SERVICE_IP}"
if [[ "$(cat "${PKI_DIR}/.complete" 2>/dev/null)" != "${PKI_STAMP}" ]]; then
  generate_pki
  step "generated CA, certificates and service account key in ${PKI_DIR}"
fi

# kwok's serving certificate for KWOK_NODE_IP, and the API server's
# client certificate towards it, when kwok serves exec and logs; the
# serving one is made anew on each start, as the node IP may change.
APISERVER_KUBELET_ARGS=()
KWOK_SERVER_ARGS=()
if [[ -n "${KWOK_SERVER_PORT}" ]]; then
  {
    cat "${PKI_DIR}/openssl.cnf"
    printf '[kwok-server]\nbasicConstraints = critical, CA:FALSE\n'
    printf 'keyUsage = critical, digitalSignature, keyEncipherment\nextendedKeyUsage = serverAuth\n'
    printf 'subjectAltName = IP:%s\n' "${KWOK_NODE_IP}"
  } >"${PKI_DIR}/kwok-server.cnf"
  openssl req -new -newkey rsa:2048 -nodes -config "${PKI_DIR}/kwok-server.cnf" \
    -keyout "${PKI_DIR}/kwok-server.key" -out "${PKI_DIR}/kwok-server.csr" -subj "/CN=kwok-server" 2>/dev/null
  openssl x509 -req -in "${PKI_DIR}/kwok-server.csr" -CA "${PKI_DIR}/ca.crt" -CAkey "${PKI_DIR}/ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -days 3650 -sha256 \
    -extfile "${PKI_DIR}/kwok-server.cnf" -extensions kwok-server -out "${PKI_DIR}/kwok-server.crt" 2>/dev/null
  rm -f "${PKI_DIR}/kwok-server.csr"
  [[ -f "${PKI_DIR}/apiserver-kubelet-client.crt" ]] ||
    gen_cert apiserver-kubelet-client "/CN=kube-apiserver-kubelet-client" client
  APISERVER_KUBELET_ARGS=(
    --kubelet-certificate-authority="${PKI_DIR}/ca.crt"
    --kubelet-client-certificate="${PKI_DIR}/apiserver-kubelet-client.crt"
    --kubelet-client-key="${PKI_DIR}/apiserver-kubelet-client.key"
    --kubelet-preferred-address-types=InternalIP)
  KWOK_SERVER_ARGS=(
    --server-address="${KWOK_NODE_IP}:${KWOK_SERVER_PORT}"
    --node-port="${KWOK_SERVER_PORT}"
    --tls-cert-file="${PKI_DIR}/kwok-server.crt"
    --tls-private-key-file="${PKI_DIR}/kwok-server.key"
    --enable-crds=Exec,ClusterExec,Logs,ClusterLogs)
  step "kwok will serve exec and logs on ${KWOK_NODE_IP}:${KWOK_SERVER_PORT}"
fi

# write_kubeconfig <file> <cert name>: credentials embedded, so the file can be copied.
write_kubeconfig() {
  local file="$1" cert="$2"
  cat >"${file}.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: ${APISERVER_URL}
    certificate-authority-data: $(base64 -w0 "${PKI_DIR}/ca.crt")
users:
- name: ${cert}
  user:
    client-certificate-data: $(base64 -w0 "${PKI_DIR}/${cert}.crt")
    client-key-data: $(base64 -w0 "${PKI_DIR}/${cert}.key")
contexts:
- name: local
  context:
    cluster: local
    user: ${cert}
current-context: local
EOF
  chmod 600 "${file}.tmp"
  mv -f "${file}.tmp" "${file}"
}
mkdir -p "${KUBECONFIG_DIR}" "${PID_DIR}"
write_kubeconfig "${KUBECONFIG_FILE}" admin
for c in kube-controller-manager kube-scheduler kwok; do
  write_kubeconfig "${KUBECONFIG_DIR}/${c}" "${c}"
done

# ---------------------------------------------------------------------------
# Processes.

# start <name> <args...>: runs bin/<name> in its own session (an interrupt
# of the caller does not reach it), output to LOCAL_DIR/<name>.log, PID to
# LOCAL_DIR/pids/<name>.pid. setsid does not fork here (a background job of a
# script is no process group leader), so $! is the component's own PID once
# the exec chain (bash, setsid, env) is done; we wait for that, or is_running
# would take the component for dead. env -u: etcd reads every ETCD_* variable
# as a flag and warns about ours.
start() {
  local name="$1" pid i
  shift
  setsid env -u ETCD_PORT -u ETCD_PEER_PORT "${BIN}/${name}" "$@" \
    </dev/null >"${LOCAL_DIR}/${name}.log" 2>&1 &
  pid=$!
  echo "${pid}" >"${PID_DIR}/${name}.pid"
  STARTED+=("${name}")
  for ((i = 0; i < 100; i++)); do
    is_running "${name}" "${pid}" && return 0
    [[ -e "/proc/${pid}" ]] || break
    sleep 0.05
  done
  log "${name} exited right after start; see ${LOCAL_DIR}/${name}.log"
  return 1
}

# wait_for <what> <command...>: polls the command until it succeeds, failing
# after CLUSTER_UP_TIMEOUT seconds or as soon as a started component died.
wait_for() {
  local what="$1" deadline=$((SECONDS + CLUSTER_UP_TIMEOUT)) c
  shift
  until "$@" >/dev/null 2>&1; do
    for c in "${STARTED[@]}"; do
      if ! is_running "${c}" "$(pid_of "${c}")"; then
        log "${c} exited while waiting for ${what}; see ${LOCAL_DIR}/${c}.log"
        return 1
      fi
    done
    if ((SECONDS >= deadline)); then
      log "timed out after ${CLUSTER_UP_TIMEOUT} s waiting for ${what}"
      return 1
    fi
    sleep 0.2
  done
}

rm -rf "${LOCAL_DIR}/etcd-data"
start etcd \
  --name=local \
  --data-dir="${LOCAL_DIR}/etcd-data" \
  --listen-client-urls="http://127.0.0.1:${ETCD_PORT}" \
  --advertise-client-urls="http://127.0.0.1:${ETCD_PORT}" \
  --listen-peer-urls="http://127.0.0.1:${ETCD_PEER_PORT}" \
  --initial-advertise-peer-urls="http://127.0.0.1:${ETCD_PEER_PORT}" \
  --initial-cluster="local=http://127.0.0.1:${ETCD_PEER_PORT}" \
  --quota-backend-bytes=8589934592 \
  --unsafe-no-fsync=true \
  --log-level=warn
etcd_healthy() { curl -sf --max-time 2 "http://127.0.0.1:${ETCD_PORT}/health" | grep -q '"health":"true"'; }
wait_for "etcd health" etcd_healthy
step "etcd is healthy on 127.0.0.1:${ETCD_PORT}"

# --endpoint-reconciler-type=none: the Endpoints of the "kubernetes" Service
# may not hold a loopback address, so the default reconciler would fail every
# 10 s; nothing in the cluster dials that Service (no real pods run).
# The requestheader/proxy-client flags set up the front proxy as in a kubeadm
# cluster; without them the delegated authentication of the controller
# manager and scheduler logs "missing content for CA bundle" over and over.
start kube-apiserver \
  --bind-address=127.0.0.1 \
  --advertise-address=127.0.0.1 \
  --secure-port="${APISERVER_PORT}" \
  --etcd-servers="http://127.0.0.1:${ETCD_PORT}" \
  --tls-cert-file="${PKI_DIR}/apiserver.crt" \
  --tls-private-key-file="${PKI_DIR}/apiserver.key" \
  --client-ca-file="${PKI_DIR}/ca.crt" \
  --authorization-mode=Node,RBAC \
  --enable-admission-plugins=NodeRestriction \
  --service-cluster-ip-range="${SERVICE_CLUSTER_IP_RANGE}" \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="${PKI_DIR}/sa.pub" \
  --service-account-signing-key-file="${PKI_DIR}/sa.key" \
  --requestheader-client-ca-file="${PKI_DIR}/front-proxy-ca.crt" \
  --requestheader-allowed-names=front-proxy-client \
  --requestheader-username-headers=X-Remote-User \
  --requestheader-group-headers=X-Remote-Group \
  --requestheader-extra-headers-prefix=X-Remote-Extra- \
  --proxy-client-cert-file="${PKI_DIR}/front-proxy-client.crt" \
  --proxy-client-key-file="${PKI_DIR}/front-proxy-client.key" \
  --endpoint-reconciler-type=none \
  --allow-privileged=true \
  --v="${KUBE_LOG_LEVEL}" \
  "${APISERVER_KUBELET_ARGS[@]}" \
  "${APISERVER_EXTRA[@]}"
apiserver_ready() { [[ "$(api_get /readyz)" == "ok" ]]; }
wait_for "kube-apiserver /readyz" apiserver_ready
step "kube-apiserver is ready on ${APISERVER_URL}"

# kwok reads Exec, ClusterExec, Logs and ClusterLogs from the API: their
# CRDs must be served before it starts.
if [[ -n "${KWOK_SERVER_PORT}" ]]; then
  kc apply -f "${ROOT}/hack/lib/kwok-debugging-crds.yaml" >/dev/null
  wait_for "kwok's CRDs established" kc wait --for=condition=Established --timeout=5s \
    crd/execs.kwok.x-k8s.io crd/clusterexecs.kwok.x-k8s.io crd/logs.kwok.x-k8s.io crd/clusterlogs.kwok.x-k8s.io
  mkdir -p "${LOCAL_DIR}/kwok-logs"
  : >"${LOCAL_DIR}/kwok-logs/empty.log"
  kc apply -f - >/dev/null <<EOF
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: default
spec:
  logs:
  - logsFile: ${LOCAL_DIR}/kwok-logs/empty.log
EOF
  step "kwok's CRDs are established; ClusterLogs default serves an empty log"
fi

# Every default controller (node lifecycle lifts the not-ready taint off kwok
# nodes) except the three that only act with a cloud provider, where this
# version still has them: Kubernetes 1.37 removed them, and refuses to
# start when --controllers names a controller it does not know.
kcm_help="$("${BIN}/kube-controller-manager" --help 2>&1 | tr -s '[:space:]' ' ')"
kcm_controllers='*'
for c in cloud-node-lifecycle-controller node-route-controller service-lb-controller; do
  if [[ "${kcm_help}" =~ [[:space:]]${c}[,.[:space:]] ]]; then
    kcm_controllers+=",-${c}"
  fi
done
start kube-controller-manager \
  --kubeconfig="${KUBECONFIG_DIR}/kube-controller-manager" \
  --authentication-kubeconfig="${KUBECONFIG_DIR}/kube-controller-manager" \
  --authorization-kubeconfig="${KUBECONFIG_DIR}/kube-controller-manager" \
  --bind-address=127.0.0.1 \
  --secure-port="${CONTROLLER_MANAGER_PORT}" \
  --controllers="${kcm_controllers}" \
  --use-service-account-credentials=true \
  --service-account-private-key-file="${PKI_DIR}/sa.key" \
  --root-ca-file="${PKI_DIR}/ca.crt" \
  --cluster-signing-cert-file="${PKI_DIR}/ca.crt" \
  --cluster-signing-key-file="${PKI_DIR}/ca.key" \
  --service-cluster-ip-range="${SERVICE_CLUSTER_IP_RANGE}" \
  --leader-elect=false \
  --v="${KUBE_LOG_LEVEL}" \
  "${CONTROLLER_MANAGER_EXTRA[@]}"

start kube-scheduler \
  --kubeconfig="${KUBECONFIG_DIR}/kube-scheduler" \
  --authentication-kubeconfig="${KUBECONFIG_DIR}/kube-scheduler" \
  --authorization-kubeconfig="${KUBECONFIG_DIR}/kube-scheduler" \
  --bind-address=127.0.0.1 \
  --secure-port="${SCHEDULER_PORT}" \
  --leader-elect=false \
  --v="${KUBE_LOG_LEVEL}" \
  "${SCHEDULER_EXTRA[@]}"

# kwok reads its Stage objects from one multi-document file.
# --node-lease-duration-seconds: without a KwokConfiguration object the lease
# duration defaults to 0, and kwok then keeps no Lease in kube-node-lease;
# the heartbeat-with-lease stage posts node status only every 10-20 minutes,
# so after node-monitor-grace-period (50 s) the node lifecycle controller
# marks every node NotReady and every pod on it Ready=False, kwok's
# node-initialize stage makes the node Ready again, and so on every minute.
# With leases (renewed every 10 s, like a kubelet) nodes stay Ready.
STAGE_FILES=("${TESTBIN_DIR}"/kwok-stages/node-fast/*.yaml
  "${TESTBIN_DIR}"/kwok-stages/node-heartbeat-with-lease/*.yaml
  "${TESTBIN_DIR}"/kwok-stages/pod-fast/*.yaml)
# kwok's own pod-delete stage deletes a pod being deleted at once, which a
# finalizer blocks for good: a Job's pods carry the Job controller's, which
# it takes off a pod only once the pod has ended. A kubelet ends the
# containers of a pod being deleted, and the pod turns Failed; so here a pod
# being deleted that a finalizer holds turns Failed, and one without a
# finalizer goes. Else a namespace being deleted that holds a running batch
# Job's pod would stay Terminating, since the namespace controller deletes
# the rest of the namespace only once its pods are gone.
{
  for f in "${STAGE_FILES[@]}"; do
    case "$(basename "${f}")" in
    pod-complete.yaml) [[ "${KWOK_JOB_PODS_COMPLETE}" == "true" ]] || continue ;;
    pod-delete.yaml) continue ;;
    esac
    echo "---"
    cat "${f}"
    echo
  done
  cat <<'STAGES'
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
    - key: '.metadata.finalizers'
      operator: 'DoesNotExist'
  next:
    delete: true
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-end-on-delete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
    - key: '.metadata.finalizers'
      operator: 'Exists'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Pending'
      - 'Running'
  next:
    statusTemplate: |
      phase: Failed
STAGES
} >"${LOCAL_DIR}/kwok.yaml"

start kwok \
  --kubeconfig="${KUBECONFIG_DIR}/kwok" \
  --config="${LOCAL_DIR}/kwok.yaml" \
  --manage-all-nodes=false \
  --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
  --cidr="${KWOK_POD_CIDR}" \
  --node-ip="${KWOK_NODE_IP}" \
  --node-lease-duration-seconds=40 \
  "${KWOK_SERVER_ARGS[@]}" \
  "${KWOK_EXTRA[@]}"
step "started kube-controller-manager, kube-scheduler and kwok"

# ---------------------------------------------------------------------------
# Simulated nodes. The API server adds the node.kubernetes.io/not-ready taint
# on creation; the node lifecycle controller lifts it once kwok reports Ready.
nodes_manifest() {
  local i name gpu=""
  if [[ "${KWOK_NODE_GPUS}" != "0" ]]; then
    gpu="\"nvidia.com/gpu\": \"${KWOK_NODE_GPUS}\", "
  fi
  local res="{${gpu}\"cpu\": \"${KWOK_NODE_CPU}\", \"memory\": \"${KWOK_NODE_MEMORY}\", \"pods\": \"${KWOK_NODE_PODS}\", \"ephemeral-storage\": \"${KWOK_NODE_EPHEMERAL_STORAGE}\"}"
  echo '{"apiVersion": "v1", "kind": "List", "items": ['
  for ((i = 0; i < KWOK_NODES; i++)); do
    name="${KWOK_NODE_PREFIX}${i}"
    ((i > 0)) && echo ","
    cat <<EOF
{"apiVersion": "v1", "kind": "Node",
 "metadata": {"name": "${name}",
  "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
  "labels": {"kubernetes.io/hostname": "${name}", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
   "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64", "type": "kwok"}},
 "spec": {},
 "status": {"capacity": ${res}, "allocatable": ${res},
  "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux", "kubeletVersion": "${KUBE_VERSION}",
   "kubeProxyVersion": "", "containerRuntimeVersion": "kwok-${KWOK_VERSION}", "kernelVersion": "",
   "osImage": "", "machineID": "", "systemUUID": "", "bootID": ""}}}
EOF
  done
  echo ']}'
}
if ((KWOK_NODES > 0)); then
  nodes_manifest | kc create -f - >/dev/null
fi
step "created ${KWOK_NODES} nodes"

# Every one of our nodes Ready and without taints.
nodes_ready() {
  local out n=0 name ready taints
  out="$(kc get nodes -l type=kwok -o \
    jsonpath='{range .items[*]}{.metadata.name}{" "}{.status.conditions[?(@.type=="Ready")].status}{" "}{.spec.taints[*].key}{"\n"}{end}')" || return 1
  while read -r name ready taints; do
    [[ -z "${name}" ]] && continue
    [[ "${ready}" == "True" && -z "${taints}" ]] || return 1
    n=$((n + 1))
  done <<<"${out}"
  ((n == KWOK_NODES))
}
# kwok holds a Lease per node: the heartbeat the node lifecycle controller reads.
leases_held() {
  local n
  n="$(kc get leases -n kube-node-lease -o name | grep -c "^lease.coordination.k8s.io/${KWOK_NODE_PREFIX}")" || return 1
  ((n == KWOK_NODES))
}
wait_for "${KWOK_NODES} nodes Ready without taints" nodes_ready
wait_for "${KWOK_NODES} node leases" leases_held
step "nodes are Ready and untainted"

wait_for "ServiceAccount default/default" kc get serviceaccount default -n default
wait_for "ConfigMap default/kube-root-ca.crt" kc get configmap kube-root-ca.crt -n default
healthz() { [[ "$(curl -sk --max-time 2 "https://127.0.0.1:$1/healthz")" == "ok" ]]; }
wait_for "kube-controller-manager /healthz" healthz "${CONTROLLER_MANAGER_PORT}"
wait_for "kube-scheduler /healthz" healthz "${SCHEDULER_PORT}"
step "default ServiceAccount exists; controller-manager and scheduler healthy"

if [[ -n "${KWOK_SERVER_PORT}" ]]; then
  kwok_serving() {
    curl -sf --max-time 2 --cacert "${PKI_DIR}/ca.crt" "https://${KWOK_NODE_IP}:${KWOK_SERVER_PORT}/healthz" >/dev/null
  }
  wait_for "kwok's server on ${KWOK_NODE_IP}:${KWOK_SERVER_PORT}" kwok_serving
  step "kwok's server answers"
fi

cat >"${LOCAL_DIR}/cluster.env" <<EOF
KUBECONFIG=${KUBECONFIG_FILE}
KUBECTL=${KUBECTL}
TESTBIN_DIR=${TESTBIN_DIR}
APISERVER_URL=${APISERVER_URL}
KUBE_VERSION=${KUBE_VERSION}
EOF

log "cluster is up in $((SECONDS - START)) s: ${APISERVER_URL}"
log "  kubeconfig: ${KUBECONFIG_FILE}"
log "  kubectl:    ${KUBECTL}"
log "  logs:       ${LOCAL_DIR}/<component>.log; stop with hack/cluster-down.sh"
echo "${KUBECONFIG_FILE}"
