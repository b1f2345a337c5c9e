#!/usr/bin/env bash
# A guided tour of an elastic MPIJob on the local cluster of hack/local-up.sh
# (`make demo` brings that up first, then runs this).
#
# In a fresh namespace (DEMO_NAMESPACE, default demo; deleted and recreated
# if it exists) it creates examples/v1/elastic/tensorflow-mnist-elastic.yaml
# and resizes it 2 -> 4 -> 1 workers. After each step it waits until the
# operator has caught up and shows what the launcher would see:
#   - the worker pods,
#   - the discovery script (ConfigMap key discover_hosts.sh) and its output,
#     which horovodrun --host-discovery-script reads,
#   - which pods the launcher's ServiceAccount may exec into (pods/exec is
#     how mpirun starts processes on the workers).
# It checks that discovery lists exactly 2, 4, then 1 Running worker(s), and
# that exec is allowed on exactly those, denied on the launcher and on removed
# workers. Then it ends the launcher as a finished training would, and waits
# for the MPIJob to succeed. Exits non-zero, saying which step and why, when a
# step does not settle within DEMO_STEP_TIMEOUT seconds [60] (the shrink gets
# the job's drainSeconds on top).
set -euo pipefail

# shellcheck source=hack/lib/demo.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/demo.sh"

NS="${DEMO_NAMESPACE:-demo}"
STEP_TIMEOUT="${DEMO_STEP_TIMEOUT:-60}"
EXAMPLE=examples/v1/elastic/tensorflow-mnist-elastic.yaml
JOB=tensorflow-mnist-elastic # metadata.name in ${EXAMPLE}
LAUNCHER="${JOB}-launcher"
CONFIGMAP="${JOB}-config"
LAUNCHER_SA="system:serviceaccount:${NS}:${JOB}-launcher"
WORKER_SELECTOR="mpi-job-name=${JOB},mpi-job-role=worker"
DRAIN_ANNOTATION=mpi-operator.kubeflow.org/draining-since
START=${SECONDS}
STEP="setup"
cd "${ROOT}"

load_cluster_env || die "no local cluster in ${LOCAL_DIR}: run 'make local-up' first (or 'make demo', which does)"
[[ -n "$(operator_pid)" ]] || die "the operator is not running: run 'make local-up' first (or 'make demo', which does)"
"${KUBECTL}" get --raw /readyz >/dev/null 2>&1 || die "the API server ${APISERVER_URL} does not answer: run 'make local-up'"

# ---------------------------------------------------------------------------
# Output helpers.

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
# the demo.
run() {
  local rc=0
  show "$@"
  "${KUBECTL}" "$@" || rc=$?
  ((rc == 0)) || fail "the command above exited with status ${rc}"
}
# kc <kubectl args...>: runs quietly in the demo namespace.
kc() { "${KUBECTL}" -n "${NS}" "$@"; }

section() {
  echo
  echo "=== $* ==="
}
note() { echo "# $*"; }

# fail <text>: what went wrong, the state of the job, the operator log; exit 1.
fail() {
  echo
  echo "FAILED in step '${STEP}': $*" >&2
  echo "--- state at $(date +%H:%M:%S):" >&2
  {
    kc get mpijob,pods,configmaps,roles -o wide 2>&1 | sed 's/^/    /'
    echo "    discover_hosts.sh:"
    discovery_script 2>&1 | sed 's/^/      /'
    echo "    pods/exec allowed on (Role ${JOB}-launcher):"
    kc get role "${JOB}-launcher" -o jsonpath='{.rules[?(@.resources[0]=="pods/exec")].resourceNames}' 2>&1 | sed 's/^/      /'
    echo
    echo "--- last lines of ${OPERATOR_LOG}:"
    tail -n 25 "${OPERATOR_LOG}" 2>&1 | sed 's/^/    /'
  } >&2
  exit 1
}

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

# ---------------------------------------------------------------------------
# What the launcher sees.

discovery_script() { kc get configmap "${CONFIGMAP}" -o jsonpath='{.data.discover_hosts\.sh}'; }

# discovery_hosts: the pod names discover_hosts.sh prints (host:slots lines,
# run by sh as horovodrun would), sorted.
discovery_hosts() {
  local script
  script="$(discovery_script)" || return 1
  sh -c "${script}" | cut -d: -f1 | sed '/^$/d' | sort
}

# worker_lines: name|phase|deletionTimestamp|draining-since of each worker.
worker_lines() {
  kc get pods -l "${WORKER_SELECTOR}" -o jsonpath='{range .items[*]}{.metadata.name}{"|"}{.status.phase}{"|"}{.metadata.deletionTimestamp}{"|"}{.metadata.annotations.mpi-operator\.kubeflow\.org/draining-since}{"\n"}{end}'
}

# can_exec <pod>: prints yes or no; returns 0 for yes, 1 for no, 2 on error.
can_exec() {
  local out
  out="$(kc auth can-i create "pods/$1" --subresource=exec --as="${LAUNCHER_SA}" 2>&1)" || true
  echo "${out}"
  case "${out}" in
    yes) return 0 ;;
    no) return 1 ;;
    *) return 2 ;;
  esac
}

lines() { sed '/^$/d' | tr '\n' ' ' | sed 's/ $//'; }
count() { sed '/^$/d' | wc -l; }

# hosts_are <n>: discover_hosts.sh lists exactly n hosts, each a Running
# worker that is neither draining nor being deleted. Sets HOSTS, ALL_WORKERS,
# DRAINING (name=draining-since lines) and UNLISTED (workers not in HOSTS).
HOSTS="" ALL_WORKERS="" DRAINING="" UNLISTED=""
hosts_are() {
  local want="$1" name phase deleted draining ready="" all="" drain="" bad
  HOSTS="$(discovery_hosts 2>/dev/null)" || {
    STATE="ConfigMap ${CONFIGMAP} not there yet"
    return 1
  }
  while IFS='|' read -r name phase deleted draining; do
    [[ -n "${name}" ]] || continue
    all+="${name}"$'\n'
    if [[ -n "${draining}" ]]; then
      drain+="${name}=${draining}"$'\n'
    elif [[ "${phase}" == "Running" && -z "${deleted}" ]]; then
      ready+="${name}"$'\n'
    fi
  done < <(worker_lines)
  ALL_WORKERS="$(sort <<<"${all}" | sed '/^$/d')"
  DRAINING="$(sort <<<"${drain}" | sed '/^$/d')"
  UNLISTED="$(comm -23 <(echo "${ALL_WORKERS}") <(echo "${HOSTS}") | sed '/^$/d')"
  ready="$(sort <<<"${ready}" | sed '/^$/d')"
  if [[ "$(count <<<"${HOSTS}")" -ne "${want}" ]]; then
    STATE="discover_hosts.sh lists $(count <<<"${HOSTS}") host(s) [$(lines <<<"${HOSTS}")], want ${want}"
    return 1
  fi
  bad="$(comm -23 <(echo "${HOSTS}") <(echo "${ready}") | lines)"
  if [[ -n "${bad}" ]]; then
    STATE="discover_hosts.sh lists [${bad}], which are not Running workers (or are draining)"
    return 1
  fi
}

# settled <n> [removed pods...]: hosts_are n and no other worker pod is
# left (drained workers deleted), the launcher may exec into exactly the
# hosts, not into itself nor into the removed workers.
settled() {
  local want="$1" p
  shift
  hosts_are "${want}" || return 1
  if [[ -n "${UNLISTED}" ]]; then
    STATE="worker pods still there besides the ${want} listed: [$(lines <<<"${UNLISTED}")]"
    [[ -z "${DRAINING}" ]] || STATE+="; draining since: [$(lines <<<"${DRAINING}")]"
    return 1
  fi
  for p in ${HOSTS}; do
    if ! can_exec "${p}" >/dev/null; then
      STATE="the launcher may not exec into ${p} (yet)"
      return 1
    fi
  done
  for p in "${LAUNCHER}" "$@"; do
    if can_exec "${p}" >/dev/null; then
      STATE="the launcher may still exec into ${p}"
      return 1
    fi
  done
}

show_workers() {
  echo
  run -n "${NS}" get pods -l "${WORKER_SELECTOR}"
}

show_discovery() {
  local script
  script="$(discovery_script)"
  echo
  note "The discovery script, as mounted in the launcher at /etc/mpi/discover_hosts.sh:"
  show -n "${NS}" get configmap "${CONFIGMAP}" -o 'jsonpath={.data.discover_hosts\.sh}'
  echo "${script}"
  note "What horovodrun gets when it runs it (host:slots):"
  show -n "${NS}" get configmap "${CONFIGMAP}" -o 'jsonpath={.data.discover_hosts\.sh}' | sed 's/$/ | sh/'
  sh -c "${script}"
}

# show_exec <expect> <pods...>: the launcher's pods/exec permission per pod;
# expect is yes, no or "-" (shown only). A mismatch fails the demo.
show_exec_header() {
  echo
  note "May the launcher (ServiceAccount ${JOB}-launcher) exec into each pod?"
  echo "+ kubectl -n ${NS} auth can-i create pods/<pod> --subresource=exec --as=${LAUNCHER_SA}"
}
show_exec() {
  local expect="$1" why="$2" p got
  shift 2
  for p in "$@"; do
    got="$(can_exec "${p}")" || true
    printf '    %-40s %-4s (%s)\n' "${p}" "${got}" "${why}"
    if [[ "${expect}" != "-" && "${got}" != "${expect}" ]]; then
      fail "the launcher's pods/exec on ${p} is '${got}', want '${expect}'"
    fi
  done
}

# ---------------------------------------------------------------------------
section "Elastic MPIJob demo on the local cluster (namespace ${NS})"
note "kubectl below is ${KUBECTL}"
note "with KUBECONFIG=${KUBECONFIG}; the operator runs as pid $(operator_pid) (log: ${OPERATOR_LOG#"${ROOT}/"})."
note "The pods are simulated by kwok: they become Running, but no container runs."

# ---------------------------------------------------------------------------
STEP="fresh namespace"
section "1. A fresh namespace '${NS}'"
if kc get namespace "${NS}" >/dev/null 2>&1; then
  note "It exists from an earlier run: delete it and wait until it is gone."
  run delete namespace "${NS}" --wait=true --timeout=120s
  ns_gone() {
    STATE="namespace ${NS} still terminating"
    ! "${KUBECTL}" get namespace "${NS}" >/dev/null 2>&1
  }
  wait_for 120 "namespace ${NS} to be gone" ns_gone
fi
run create namespace "${NS}"
# Pods are refused until the namespace's default ServiceAccount exists.
sa_exists() {
  STATE="no ServiceAccount default in ${NS}"
  kc get serviceaccount default >/dev/null 2>&1
}
wait_for 30 "the default ServiceAccount" sa_exists

# ---------------------------------------------------------------------------
STEP="create the job (2 workers)"
section "2. Create the elastic MPIJob: 2 workers (minReplicas 1, maxReplicas 4)"
run -n "${NS}" create -f "${EXAMPLE}"
DRAIN_SECONDS="$(kc get mpijob "${JOB}" -o jsonpath='{.spec.elasticPolicy.drainSeconds}')"
DRAIN_SECONDS="${DRAIN_SECONDS:-0}"
wait_for "${STEP_TIMEOUT}" "2 workers in discover_hosts.sh, exec allowed on exactly them" settled 2
show_workers
show_discovery
show_exec_header
# shellcheck disable=SC2086 # HOSTS is a list of pod names
show_exec yes "listed worker" ${HOSTS}
show_exec no "the launcher itself" "${LAUNCHER}"
FIRST_HOSTS="${HOSTS}"

# ---------------------------------------------------------------------------
STEP="scale up to 4 workers"
section "3. Scale up to 4 workers"
run -n "${NS}" scale "mpijob/${JOB}" --replicas=4
wait_for "${STEP_TIMEOUT}" "4 workers in discover_hosts.sh, exec allowed on exactly them" settled 4
missing="$(comm -23 <(echo "${FIRST_HOSTS}") <(echo "${HOSTS}") | lines)"
[[ -z "${missing}" ]] || fail "the workers of step 2 should have stayed, but [${missing}] left"
note "The 2 workers of step 2 stayed; 2 joined: $(comm -13 <(echo "${FIRST_HOSTS}") <(echo "${HOSTS}") | lines)"
show_workers
show_discovery
show_exec_header
# shellcheck disable=SC2086
show_exec yes "listed worker" ${HOSTS}
show_exec no "the launcher itself" "${LAUNCHER}"

# ---------------------------------------------------------------------------
STEP="scale down to 1 worker"
section "4. Scale down to 1 worker (drainSeconds ${DRAIN_SECONDS})"
BEFORE="${HOSTS}"
shrink_start=${SECONDS}
run -n "${NS}" scale "mpijob/${JOB}" --replicas=1
wait_for "${STEP_TIMEOUT}" "discover_hosts.sh to list 1 worker" hosts_are 1
VICTIMS="$(comm -23 <(echo "${BEFORE}") <(echo "${HOSTS}"))"
if [[ "$(count <<<"${VICTIMS}")" -ne 3 ]]; then
  fail "expected 3 of [$(lines <<<"${BEFORE}")] to be removed, got [$(lines <<<"${VICTIMS}")]"
fi
if [[ -n "${UNLISTED}" ]]; then
  note "Draining: $(lines <<<"${UNLISTED}")"
  note "left discover_hosts.sh at once, so horovod stops using them; the operator"
  note "deletes them once the drain period (drainSeconds ${DRAIN_SECONDS}) has passed."
  echo
  run -n "${NS}" get pods -l "${WORKER_SELECTOR}" \
    -o "custom-columns=NAME:.metadata.name,STATUS:.status.phase,DRAINING-SINCE:.metadata.annotations.${DRAIN_ANNOTATION//./\\.}"
  unmarked="$(comm -23 <(echo "${UNLISTED}") <(cut -d= -f1 <<<"${DRAINING}") | lines)"
  if [[ -n "${unmarked}" ]]; then
    echo "WARNING: [${unmarked}] left discover_hosts.sh but carry no ${DRAIN_ANNOTATION}"
    echo "WARNING: annotation: the operator has not started their drain period."
  fi
  show_discovery
  show_exec_header
  # shellcheck disable=SC2086
  show_exec yes "listed worker" ${HOSTS}
  # shellcheck disable=SC2086
  show_exec - "removed, draining" ${UNLISTED}
else
  note "The removed workers are already gone."
fi
echo
note "Waiting for the drain period to end and the removed workers to be deleted."
# shellcheck disable=SC2086
wait_for "$((DRAIN_SECONDS + STEP_TIMEOUT))" "the removed workers to be deleted, exec allowed on exactly the one left" \
  settled 1 ${VICTIMS}
took=$((SECONDS - shrink_start))
note "The removed workers were deleted ${took} s after the shrink (drainSeconds ${DRAIN_SECONDS})."
if ((took + 2 < DRAIN_SECONDS)); then
  echo "WARNING: that is before the drain period ended: horovod had no time to let them go."
fi
show_workers
show_discovery
show_exec_header
# shellcheck disable=SC2086
show_exec yes "listed worker" ${HOSTS}
show_exec no "the launcher itself" "${LAUNCHER}"
# shellcheck disable=SC2086
show_exec no "removed worker" ${VICTIMS}

# ---------------------------------------------------------------------------
STEP="finish the training"
section "5. The training ends"
note "kwok only simulates the pods: the launcher would 'run' forever. When horovodrun exits 0,"
note "the kubelet writes the container's termination into the pod's status; the demo writes"
note "that status itself, through the status subresource:"
container="$(kc get pod "${LAUNCHER}" -o jsonpath='{.spec.containers[0].name}')"
image="$(kc get pod "${LAUNCHER}" -o jsonpath='{.spec.containers[0].image}')"
now="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
patch="{\"status\":{\"phase\":\"Succeeded\",\"containerStatuses\":[{\"name\":\"${container}\",\"image\":\"${image}\",\"imageID\":\"\",\"ready\":false,\"restartCount\":0,\"state\":{\"terminated\":{\"exitCode\":0,\"reason\":\"Completed\",\"finishedAt\":\"${now}\"}}}]}}"
run -n "${NS}" patch pod "${LAUNCHER}" --subresource=status --type=merge -p "${patch}"
succeeded() {
  local s
  s="$(kc get mpijob "${JOB}" -o jsonpath='{.status.conditions[?(@.type=="Succeeded")].status}')"
  STATE="condition Succeeded is '${s:-absent}'"
  [[ "${s}" == "True" ]]
}
wait_for "${STEP_TIMEOUT}" "the MPIJob's Succeeded condition" succeeded
echo
run -n "${NS}" get mpijob
echo
run -n "${NS}" get mpijob "${JOB}" \
  -o 'jsonpath={range .status.conditions[*]}{.type}{"\t"}{.status}{"\t"}{.reason}{"\t"}{.message}{"\n"}{end}'

# cleanPodPolicy Running: the worker still running is deleted once the job is done.
workers_gone() {
  local n
  n="$(worker_lines | count)"
  STATE="${n} worker pod(s) left"
  [[ "${n}" -eq 0 ]]
}
echo
note "cleanPodPolicy is Running: the operator deletes the workers still running."
STEP="clean-up of the workers"
wait_for "${STEP_TIMEOUT}" "no worker pods left" workers_gone
run -n "${NS}" get pods

section "Demo passed in $((SECONDS - START)) s"
note "Look around:  export KUBECONFIG=${KUBECONFIG}; ${KUBECTL} -n ${NS} get all,mpijobs"
note "Stop it all:  make local-down"
