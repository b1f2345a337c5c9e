#!/usr/bin/env bash
# Stops what hack/local-up.sh started: the operator process, v1 or v2 (SIGTERM, which
# releases its leader Lease; SIGKILL after OPERATOR_STOP_TIMEOUT seconds),
# then the control plane (hack/cluster-down.sh). Returns once every process
# has exited. Safe to run when nothing, or only part, is running.
#
# Usage: hack/local-down.sh [--purge]
#   --purge  also delete LOCAL_DIR (etcd data, certificates, kubeconfig, logs)
# Environment: LOCAL_DIR [_output/local], OPERATOR_STOP_TIMEOUT [30],
# STOP_TIMEOUT [30] (for the control plane).
set -euo pipefail

# shellcheck source=hack/lib/demo.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/demo.sh"

case "${1:-}" in
  "" | --purge) ;;
  *)
    echo "usage: $0 [--purge]" >&2
    exit 2
    ;;
esac

START=${SECONDS}
# Either operator (OPERATOR=v1 or v2 of local-up.sh) may run.
stopped=false
for name in "${OPERATORS[@]}"; do
  pid="$(pid_of "${name}")"
  is_running "${name}" "${pid}" || pid=""
  operator_stop "${name}" # says "stopping <name> (pid N)"
  [[ -n "${pid}" ]] && stopped=true
  # The operator is a direct child of nobody we know: wait until it is
  # also reaped, so that ps shows nothing left.
  for ((i = 0; i < 50; i++)); do
    [[ -n "${pid}" && -e "/proc/${pid}" ]] || break
    sleep 0.1
  done
done
${stopped} || say "the operator is not running"

say "stopping the control plane"
"${ROOT}/hack/cluster-down.sh" "$@"
say "everything is down ($((SECONDS - START)) s)"
