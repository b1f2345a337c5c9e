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

export OPERATOR=v1
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

# The shared steps and helpers (show, run, kc, section, note, wait_for,
# fail, fresh_namespace, worker_lines, job_is, finish, passed, ...).
# shellcheck source=hack/lib/tour.sh
source "${ROOT}/hack/lib/tour.sh"
require_cluster "'make local-up' first (or 'make demo', which does)"

# tour_state: what a failure shows.
tour_state() {
  kc get mpijob,pods,configmaps,roles -o wide
  echo "discover_hosts.sh:"
  discovery_script | sed 's/^/  /'
  echo "pods/exec allowed on (Role ${JOB}-launcher):"
  kc get role "${JOB}-launcher" -o jsonpath='{.rules[?(@.resources[0]=="pods/exec")].resourceNames}' | sed 's/^/  /'
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
fresh_namespace

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
finish "${LAUNCHER}"
passed
