#!/usr/bin/env bash
# A guided tour of an elastic kubeflow.org/v2beta1 MPIJob on the local
# cluster of hack/local-up.sh run with OPERATOR=v2 (`make demo-v2` brings
# that up first, then runs this).
#
# In a fresh namespace (DEMO_NAMESPACE, default demo; deleted and recreated
# if it exists) it creates examples/v2beta1/elastic/tensorflow-mnist-elastic.yaml,
# resizes it 2 -> 4 -> 1 workers, suspends and resumes it (as Kueue does),
# and ends its launcher as a finished training would. After each step it
# waits until the operator has caught up and shows what the launcher would
# see: the worker pods, the discovery script (ConfigMap key
# discover_hosts.sh, which horovodrun --host-discovery-script runs) and its
# output. It checks that the script lists exactly the Running workers,
# never one that drains or is being deleted. Exits non-zero, saying which
# step and why, when a step does not settle within DEMO_STEP_TIMEOUT
# seconds [60] (the shrink gets the job's drainSeconds on top).
set -euo pipefail

export OPERATOR=v2
# shellcheck source=hack/lib/demo.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/demo.sh"

NS="${DEMO_NAMESPACE:-demo}"
STEP_TIMEOUT="${DEMO_STEP_TIMEOUT:-60}"
EXAMPLE=examples/v2beta1/elastic/tensorflow-mnist-elastic.yaml
JOB=tensorflow-mnist-elastic # metadata.name in ${EXAMPLE}
CONFIGMAP="${JOB}-config"
JOB_SELECTOR="training.kubeflow.org/job-name=${JOB}"
WORKER_SELECTOR="${JOB_SELECTOR},training.kubeflow.org/job-role=worker"
LAUNCHER_SELECTOR="${JOB_SELECTOR},training.kubeflow.org/job-role=launcher"
START=${SECONDS}
STEP="setup"
cd "${ROOT}"

# The shared steps and helpers (show, run, kc, section, note, wait_for,
# fail, fresh_namespace, worker_lines, job_is, finish, passed, ...).
# shellcheck source=hack/lib/tour.sh
source "${ROOT}/hack/lib/tour.sh"
require_cluster "'OPERATOR=v2 hack/local-up.sh' first (or 'make demo-v2', which does)"

# tour_state: what a failure shows.
tour_state() {
  kc get mpijob,jobs.batch,pods -o wide
  echo "discover_hosts.sh:"
  script | sed 's/^/  /'
}

# ---------------------------------------------------------------------------
# What the launcher sees.

script() { kc get configmap "${CONFIGMAP}" -o jsonpath='{.data.discover_hosts\.sh}'; }

# listed: the pods discover_hosts.sh names, run by sh as horovodrun would
# (each host is <pod>.<subdomain>.<namespace>.svc), sorted.
listed() {
  local text
  text="$(script)" || return 1
  sh -c "${text}" | cut -d. -f1 | sed '/^$/d' | sort
}

# lists <n>: discover_hosts.sh lists exactly n hosts, each a Running worker
# that does not drain. Sets HOSTS and OTHERS (the workers not listed, with
# their state). A listed worker that is gone or being deleted fails the
# demo at once: horovod would reach for a host that is going away.
HOSTS="" OTHERS=""
lists() {
  local want="$1" name phase deleted draining live="" usable="" others="" bad
  HOSTS="$(listed 2>/dev/null)" || {
    STATE="ConfigMap ${CONFIGMAP} not there yet"
    return 1
  }
  while IFS='|' read -r name phase deleted draining; do
    [[ -n "${name}" ]] || continue
    [[ -z "${deleted}" ]] && live+="${name}"$'\n'
    if [[ "${phase}" == Running && -z "${deleted}" && -z "${draining}" ]]; then
      usable+="${name}"$'\n'
    fi
    if ! grep -qx "${name}" <<<"${HOSTS}"; then
      others+="${name}(${phase}${draining:+, draining since ${draining}}${deleted:+, being deleted})"$'\n'
    fi
  done < <(worker_lines)
  OTHERS="$(lines <<<"${others}")"
  bad="$(comm -23 <(echo "${HOSTS}") <(sort <<<"${live}" | sed '/^$/d') | lines)"
  [[ -z "${bad}" ]] || fail "discover_hosts.sh lists [${bad}], which are gone or being deleted"
  bad="$(comm -23 <(echo "${HOSTS}") <(sort <<<"${usable}" | sed '/^$/d') | lines)"
  if [[ -n "${bad}" ]]; then
    # A worker chosen for removal is marked first and leaves the script
    # in the operator's next write.
    STATE="discover_hosts.sh lists [${bad}], which do not run or drain"
    return 1
  fi
  if [[ "$(count <<<"${HOSTS}")" -ne "${want}" ]]; then
    STATE="discover_hosts.sh lists $(count <<<"${HOSTS}") host(s) [$(lines <<<"${HOSTS}")], want ${want}; other workers: [${OTHERS}]"
    return 1
  fi
}

# settled <n>: lists n, and no other worker pod is left.
settled() {
  lists "$1" || return 1
  if [[ -n "${OTHERS}" ]]; then
    STATE="worker pods besides the $1 listed: [${OTHERS}]"
    return 1
  fi
}

# launcher_running: the launcher Job's pod runs.
launcher_running() {
  local phases
  phases="$(kc get pods -l "${LAUNCHER_SELECTOR}" -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | lines)"
  STATE="launcher pods: [${phases}]"
  [[ "${phases}" == Running ]]
}

show_state() {
  echo
  run -n "${NS}" get mpijob "${JOB}"
  run -n "${NS}" get pods -l "${JOB_SELECTOR}" -L training.kubeflow.org/job-role
  echo
  note "The discovery script, as mounted in the launcher at /etc/mpi/discover_hosts.sh:"
  show -n "${NS}" get configmap "${CONFIGMAP}" -o 'jsonpath={.data.discover_hosts\.sh}'
  script
  note "What horovodrun gets when it runs it: each worker's DNS name under its Service"
  sh -c "$(script)"
}

# ---------------------------------------------------------------------------
section "Elastic MPIJob demo, kubeflow.org/v2beta1, on the local cluster (namespace ${NS})"
note "kubectl below is ${KUBECTL}"
note "with KUBECONFIG=${KUBECONFIG}; the v2 operator runs as pid $(operator_pid) (log: ${OPERATOR_LOG#"${ROOT}/"})."
note "The pods are simulated by kwok: they become Running, but no container runs."

# ---------------------------------------------------------------------------
fresh_namespace

# ---------------------------------------------------------------------------
STEP="create the job (2 workers)"
section "2. Create the elastic MPIJob: 2 workers (minReplicas 1, maxReplicas 4)"
run -n "${NS}" create --validate=strict -f "${EXAMPLE}"
DRAIN_SECONDS="$(kc get mpijob "${JOB}" -o jsonpath='{.spec.elasticPolicy.drainSeconds}')"
DRAIN_SECONDS="${DRAIN_SECONDS:-0}"
wait_for "${STEP_TIMEOUT}" "the job to be Running" job_is Running True
wait_for "${STEP_TIMEOUT}" "discover_hosts.sh to list exactly the 2 Running workers" settled 2
note "The operator made the launcher Job ${JOB}-launcher, the headless Service ${JOB} that gives each"
note "pod its DNS name, the SSH Secret ${JOB}-ssh and the ConfigMap ${CONFIGMAP}:"
run -n "${NS}" get jobs.batch,services,secrets,configmaps -l "app=${JOB}"
show_state
FIRST="${HOSTS}"

# ---------------------------------------------------------------------------
STEP="scale up to 4 workers"
section "3. Scale up to 4 workers"
run -n "${NS}" scale "mpijob/${JOB}" --replicas=4
wait_for "${STEP_TIMEOUT}" "discover_hosts.sh to list exactly the 4 Running workers" settled 4
gone="$(comm -23 <(echo "${FIRST}") <(echo "${HOSTS}") | lines)"
[[ -z "${gone}" ]] || fail "the workers of step 2 should have stayed, but [${gone}] left"
note "The 2 workers of step 2 stayed; 2 joined: $(comm -13 <(echo "${FIRST}") <(echo "${HOSTS}") | lines)"
show_state

# ---------------------------------------------------------------------------
STEP="scale down to 1 worker"
section "4. Scale down to 1 worker (drainSeconds ${DRAIN_SECONDS})"
BEFORE="${HOSTS}"
shrink_start=${SECONDS}
run -n "${NS}" scale "mpijob/${JOB}" --replicas=1
wait_for "${STEP_TIMEOUT}" "discover_hosts.sh to list 1 worker" lists 1
VICTIMS="$(comm -23 <(echo "${BEFORE}") <(echo "${HOSTS}"))"
[[ "$(count <<<"${VICTIMS}")" -eq 3 ]] || fail "expected 3 of [$(lines <<<"${BEFORE}")] to leave, got [$(lines <<<"${VICTIMS}")]"
note "[$(lines <<<"${VICTIMS}")] left discover_hosts.sh at once, so horovod stops using them;"
note "their pods stay until the drain period (drainSeconds ${DRAIN_SECONDS}) has passed: [${OTHERS}]"
show_state
echo
wait_for "$((DRAIN_SECONDS + STEP_TIMEOUT))" "the removed workers to be deleted" settled 1
took=$((SECONDS - shrink_start))
note "The removed workers were deleted ${took} s after the shrink (drainSeconds ${DRAIN_SECONDS})."
((took + 2 >= DRAIN_SECONDS)) || fail "they went before the drain period ended: horovod had no time to let them go"
show_state

# ---------------------------------------------------------------------------
STEP="suspend"
section "5. Suspend the job, as Kueue does when it takes the quota back"
run -n "${NS}" patch mpijob "${JOB}" --type=merge -p '{"spec":{"runPolicy":{"suspend":true}}}'
no_pods() {
  local n
  n="$(kc get pods -l "${JOB_SELECTOR}" -o name | count)"
  STATE="${n} pod(s) left"
  [[ "${n}" -eq 0 ]]
}
wait_for "${STEP_TIMEOUT}" "the job to be Suspended" job_is Suspended True
wait_for "${STEP_TIMEOUT}" "every pod of the job to be gone" no_pods
note "The launcher Job is suspended with it (spec.suspend: $(kc get job.batch "${JOB}-launcher" -o jsonpath='{.spec.suspend}')); the"
note "Service, Secret and ConfigMap stay for the resume."
run -n "${NS}" get mpijob "${JOB}"
run -n "${NS}" get mpijob "${JOB}" \
  -o 'jsonpath={range .status.conditions[*]}{.type}{"\t"}{.status}{"\t"}{.reason}{"\n"}{end}'

# ---------------------------------------------------------------------------
STEP="resume"
section "6. Resume it"
run -n "${NS}" patch mpijob "${JOB}" --type=merge -p '{"spec":{"runPolicy":{"suspend":false}}}'
wait_for "${STEP_TIMEOUT}" "the job to be Running again" job_is Running True
wait_for "${STEP_TIMEOUT}" "discover_hosts.sh to list exactly the 1 Running worker" settled 1
wait_for "${STEP_TIMEOUT}" "the launcher's pod to run" launcher_running
show_state

# ---------------------------------------------------------------------------
STEP="finish the training"
section "7. The training ends"
launcher="$(kc get pods -l "${LAUNCHER_SELECTOR}" -o jsonpath='{.items[0].metadata.name}')"
finish "${launcher}"
passed
