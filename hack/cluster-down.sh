#!/usr/bin/env bash
# Stops the local control plane started by hack/cluster-up.sh: each recorded
# process (and any stray one of the same cluster, recognised by its arguments
# naming LOCAL_DIR) gets SIGTERM, then SIGKILL after STOP_TIMEOUT seconds, and
# this returns only once every one of them has exited, so their ports are
# free for the next cluster-up.
#
# Usage: hack/cluster-down.sh [--purge]
#   --purge  also delete LOCAL_DIR (etcd data, certificates, kubeconfig, logs)
# Environment: LOCAL_DIR [_output/local], STOP_TIMEOUT [30]
set -euo pipefail

# shellcheck source=hack/lib/local-cluster.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/local-cluster.sh"

purge=false
case "${1:-}" in
  "") ;;
  --purge) purge=true ;;
  *)
    echo "usage: $0 [--purge]" >&2
    exit 2
    ;;
esac

START=${SECONDS}
stop_all
rm -f "${LOCAL_DIR}/cluster.env"
if ${purge}; then
  rm -rf "${LOCAL_DIR}"
  log "removed ${LOCAL_DIR}"
fi
log "cluster in ${LOCAL_DIR} is down ($((SECONDS - START)) s)"
