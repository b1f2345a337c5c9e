#!/usr/bin/env bash
# Turns the reclaim of a node into a named scale-in of the elastic MPIJobs
# whose workers run on it: for each node marked for termination (one of the
# taints below, which spot termination handlers and cordon set), the job's
# workers on that node are removed with
#   kubectl mpijob scale-in JOB --pod WORKER[,WORKER...]
# so that they leave discover_hosts.sh and Horovod drops them before the
# node goes, instead of losing their ranks mid-step. The job goes on with
# fewer workers; scale it out again once capacity is back.
#
# Usage:
#   spot-reclaim.sh [--once] [--interval SECONDS] [--timeout DURATION]
#                   [--namespace NS] [--taint KEY]...
#
#   --once        one pass over the nodes, then exit (for a CronJob, or a test)
#   --interval    seconds between passes when looping [10]
#   --timeout     how long each scale-in waits for its workers to go [5m]
#   --namespace   only the jobs of this namespace [all namespaces]
#   --taint       a taint key that marks a node for termination; repeat for
#                 more. Replaces the default list:
#                   node.kubernetes.io/unschedulable   (kubectl cordon, drain)
#                   aws-node-termination-handler/spot-itn
#                   cloud.google.com/impending-node-termination
#                   karpenter.sh/disrupted
#                   ToBeDeletedByClusterAutoscaler
#
# Needs kubectl and the kubectl-mpijob plugin on PATH, and the rights of
# rbac.yaml (KUBECONFIG, or the pod's ServiceAccount in a cluster).
set -euo pipefail

TAINTS=(
  node.kubernetes.io/unschedulable
  aws-node-termination-handler/spot-itn
  cloud.google.com/impending-node-termination
  karpenter.sh/disrupted
  ToBeDeletedByClusterAutoscaler
)
ONCE=false INTERVAL=10 TIMEOUT=5m NAMESPACE=""
DRAINING=mpi-operator.kubeflow.org/draining-since

# The worker labels of each MPIJob version: the role, and the job's name.
declare -A ROLE_LABEL=([v1]=mpi-job-role [v2beta1]=training.kubeflow.org/job-role)
declare -A JOB_LABEL=([v1]=mpi-job-name [v2beta1]=training.kubeflow.org/job-name)

log() { echo "[spot-reclaim $(date -u +%H:%M:%S)] $*" >&2; }

parse_args() {
  local custom_taints=()
  while (($#)); do
    case "$1" in
      --once) ONCE=true ;;
      --interval) INTERVAL="$2"; shift ;;
      --timeout) TIMEOUT="$2"; shift ;;
      --namespace) NAMESPACE="$2"; shift ;;
      --taint) custom_taints+=("$2"); shift ;;
      *) echo "unknown argument $1 (see the head of $0)" >&2; exit 2 ;;
    esac
    shift
  done
  if ((${#custom_taints[@]})); then TAINTS=("${custom_taints[@]}"); fi
}

# reclaimed_nodes prints the nodes that carry one of TAINTS.
reclaimed_nodes() {
  local name taints key
  while IFS=$'\t' read -r name taints; do
    for key in ${taints}; do
      if [[ " ${TAINTS[*]} " == *" ${key} "* ]]; then
        echo "${name}"
        break
      fi
    done
  done < <(kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.name}{"\t"}{range .spec.taints[*]}{.key}{" "}{end}{"\n"}{end}')
}

# workers_on NODE VERSION prints "namespace job pod" for each worker of a
# job of that version on the node that is not leaving already (draining,
# or being deleted).
workers_on() {
  local node="$1" version="$2" scope=(--all-namespaces)
  [[ -n "${NAMESPACE}" ]] && scope=(--namespace "${NAMESPACE}")
  local job_path=".metadata.labels.${JOB_LABEL[${version}]//./\\.}"
  local draining_path=".metadata.annotations.${DRAINING//./\\.}"
  kubectl get pods "${scope[@]}" -l "${ROLE_LABEL[${version}]}=worker" \
    --field-selector "spec.nodeName=${node}" \
    -o jsonpath="{range .items[*]}{.metadata.namespace} {${job_path}} {.metadata.name} {${draining_path}}{.metadata.deletionTimestamp}{\"\n\"}{end}" |
    awk 'NF == 3 { print $1, $2, $3 }'
}

# scale_in VERSION NAMESPACE JOB POD... removes the named workers of a job.
scale_in() {
  local version="$1" ns="$2" job="$3"
  shift 3
  local pods
  pods="$(IFS=,; echo "$*")"
  log "node reclaim: scaling in mpijob ${ns}/${job} (${version}) by ${pods}"
  if ! kubectl mpijob --api-version "${version}" --namespace "${ns}" scale-in "${job}" --pod "${pods}" --timeout "${TIMEOUT}"; then
    log "scale-in of ${ns}/${job} failed (see above); the next pass tries again"
  fi
}

# served_versions prints the MPIJob versions the cluster serves.
served_versions() {
  local version
  for version in v1 v2beta1; do
    if kubectl get --raw "/apis/kubeflow.org/${version}" 2>/dev/null | grep -q '"name":"mpijobs"'; then
      echo "${version}"
    fi
  done
}

# one_pass scales in the jobs of every worker on a reclaimed node, each job
# once with all of its workers on those nodes, the jobs side by side.
one_pass() {
  local nodes version node
  mapfile -t nodes < <(reclaimed_nodes)
  ((${#nodes[@]})) || return 0
  for version in $(served_versions); do
    declare -A victims=()
    local ns job pod key
    for node in "${nodes[@]}"; do
      while read -r ns job pod; do
        victims["${ns} ${job}"]+="${pod} "
      done < <(workers_on "${node}" "${version}")
    done
    for key in "${!victims[@]}"; do
      read -r ns job <<<"${key}"
      # shellcheck disable=SC2086 # the pod names are words
      scale_in "${version}" "${ns}" "${job}" ${victims[${key}]} &
    done
    unset victims
  done
  wait
}

main() {
  parse_args "$@"
  log "watching nodes tainted ${TAINTS[*]}"
  while true; do
    one_pass
    ${ONCE} && return 0
    sleep "${INTERVAL}"
  done
}

main "$@"
