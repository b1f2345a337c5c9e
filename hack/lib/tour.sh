#!/usr/bin/env bash
# The steps and helpers that the guided tours, hack/demo.sh (v1) and
# hack/demo-v2.sh (v2beta1), share: output, waits, the first and last
# steps. Sourced after hack/lib/demo.sh, by a tour that sets NS, JOB,
# WORKER_SELECTOR, STEP_TIMEOUT, START and STEP, and defines tour_state,
# which prints the state that a failure shows.
# shellcheck disable=SC2034  # STATE and STEP are read by the tours

# show <kubectl args...>: prints the command as you would type it, quoting
# what the shell would need quoted.
show() {
  local out="+ kubectl" a q="'"
  for a in "$@"; do
    if [[ "${a}" =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then
      out+=" ${a}"
    else
      out+=" '${a//${q}/${q}\\${q}${q}}'"
    fi
  done
  echo "${out}"
}

# run <kubectl args...>: shows the command, then runs it; a failure fails
# the tour.
run() {
  local rc=0
  show "$@"
  "${KUBECTL}" "$@" || rc=$?
  ((rc == 0)) || fail "the command above exited with status ${rc}"
}

section() {
  echo
  echo "=== $* ==="
}
note() { echo "# $*"; }

# wait_for <timeout> <what> <command...>: polls the command every second;
# the command leaves the reason it is not there yet in STATE.
STATE=""
wait_for() {
  local timeout="$1" what="$2" t0=${SECONDS}
  shift 2
  echo "... waiting for ${what} (at most ${timeout} s)"
  until "$@"; do
    if ((SECONDS - t0 >= timeout)); then
      fail "timed out after ${timeout} s waiting for ${what}: ${STATE}"
    fi
    sleep 1
  done
  echo "... done after $((SECONDS - t0)) s"
}

# lines joins its input's lines with spaces; count counts them. Empty
# lines do not count.
lines() { sed '/^$/d' | tr '\n' ' ' | sed 's/ $//'; }
count() { sed '/^$/d' | wc -l; }

# succeed_pod <namespace> <pod>: writes the status the kubelet would write
# once the pod's first container exits 0, through the status subresource
# (kwok runs no container, so its pods never end on their own).
succeed_pod() {
  local ns="$1" pod="$2" container image now
  container="$("${KUBECTL}" -n "${ns}" get pod "${pod}" -o jsonpath='{.spec.containers[0].name}')"
  image="$("${KUBECTL}" -n "${ns}" get pod "${pod}" -o jsonpath='{.spec.containers[0].image}')"
  now="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  run -n "${ns}" patch pod "${pod}" --subresource=status --type=merge -p "{\"status\":{\"phase\":\"Succeeded\",\"containerStatuses\":[{\"name\":\"${container}\",\"image\":\"${image}\",\"imageID\":\"\",\"ready\":false,\"restartCount\":0,\"state\":{\"terminated\":{\"exitCode\":0,\"reason\":\"Completed\",\"finishedAt\":\"${now}\"}}}]}}"
}

# kc <kubectl args...>: runs quietly in the tour's namespace NS.
kc() { "${KUBECTL}" -n "${NS}" "$@"; }

# require_cluster <how to start it>: the local cluster and the operator of
# hack/lib/demo.sh are up, and KUBECONFIG points at the cluster.
require_cluster() {
  load_cluster_env || die "no local cluster in ${LOCAL_DIR}: run $1"
  [[ -n "$(operator_pid)" ]] || die "the operator ${OPERATOR} is not running: run $1"
  "${KUBECTL}" get --raw /readyz >/dev/null 2>&1 || die "the API server ${APISERVER_URL} does not answer: run $1"
}

# fail <text>: what went wrong in STEP, the state (the tour's function
# tour_state prints it), the operator log; exit 1.
fail() {
  echo
  echo "FAILED in step '${STEP}': $*" >&2
  {
    echo "--- state at $(date +%H:%M:%S):"
    tour_state 2>&1 | sed 's/^/    /'
    echo
    echo "--- last lines of ${OPERATOR_LOG}:"
    tail -n 25 "${OPERATOR_LOG}" 2>&1 | sed 's/^/    /'
  } >&2
  exit 1
}

# fresh_namespace: the tour's first step, namespace NS created anew (after
# deleting one of an earlier run) with its default ServiceAccount, without
# which pods are refused.
fresh_namespace() {
  STEP="fresh namespace"
  section "1. A fresh namespace '${NS}'"
  if kc get namespace "${NS}" >/dev/null 2>&1; then
    note "It exists from an earlier run: delete it and wait until it is gone."
    run delete namespace "${NS}" --wait=true --timeout=120s
    wait_for 120 "namespace ${NS} to be gone" namespace_gone
  fi
  run create namespace "${NS}"
  wait_for 30 "the default ServiceAccount" default_service_account
}
namespace_gone() {
  STATE="namespace ${NS} still terminating"
  ! "${KUBECTL}" get namespace "${NS}" >/dev/null 2>&1
}
default_service_account() {
  STATE="no ServiceAccount default in ${NS}"
  kc get serviceaccount default >/dev/null 2>&1
}

# worker_lines: name|phase|deletionTimestamp|draining-since of each worker
# (WORKER_SELECTOR).
worker_lines() {
  kc get pods -l "${WORKER_SELECTOR}" -o jsonpath='{range .items[*]}{.metadata.name}{"|"}{.status.phase}{"|"}{.metadata.deletionTimestamp}{"|"}{.metadata.annotations.mpi-operator\.kubeflow\.org/draining-since}{"\n"}{end}'
}

# job_is <type> <status>: the MPIJob JOB's condition has that status.
job_is() {
  local s
  s="$(kc get mpijob "${JOB}" -o jsonpath="{.status.conditions[?(@.type==\"$1\")].status}")"
  STATE="condition $1 is '${s:-absent}', want $2"
  [[ "${s}" == "$2" ]]
}

# finish <launcher pod>: the training ends, as the kubelet would report
# it; the job succeeds, and (cleanPodPolicy Running) its workers go.
finish() {
  note "kwok only simulates the pods: the launcher would 'run' forever. When horovodrun exits 0,"
  note "the kubelet writes the container's termination into the pod's status; the demo writes"
  note "that status itself, through the status subresource:"
  succeed_pod "${NS}" "$1"
  wait_for "${STEP_TIMEOUT}" "the MPIJob's Succeeded condition" job_is Succeeded True
  echo
  run -n "${NS}" get mpijob "${JOB}"
  echo
  run -n "${NS}" get mpijob "${JOB}" \
    -o 'jsonpath={range .status.conditions[*]}{.type}{"\t"}{.status}{"\t"}{.reason}{"\t"}{.message}{"\n"}{end}'
  echo
  note "cleanPodPolicy is Running: the operator deletes the workers still running."
  STEP="clean-up of the workers"
  wait_for "${STEP_TIMEOUT}" "no worker pods left" workers_gone
  run -n "${NS}" get pods
}
workers_gone() {
  local n
  n="$(worker_lines | count)"
  STATE="${n} worker pod(s) left"
  [[ "${n}" -eq 0 ]]
}

# passed: the tour's last words.
passed() {
  section "Demo passed in $((SECONDS - START)) s"
  note "Look around:  export KUBECONFIG=${KUBECONFIG}; ${KUBECTL} -n ${NS} get all,mpijobs"
  note "Stop it all:  make local-down"
}
