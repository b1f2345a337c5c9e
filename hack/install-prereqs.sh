#!/usr/bin/env bash
# Installs, from Debian's packages, the commands that the scripts of hack/
# use beyond Go, gcc and git (see hack/lib/prereqs.sh), when any is missing.
# It needs root or sudo only when there is something to install.
set -euo pipefail

# shellcheck source=hack/lib/prereqs.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/prereqs.sh"

packages=()
for cmd in "${!PREREQ_PACKAGE[@]}"; do
  command -v "${cmd}" >/dev/null 2>&1 || packages+=("${PREREQ_PACKAGE[${cmd}]}")
done
mapfile -t -O "${#packages[@]}" packages < <(missing_python_packages)
if ((${#packages[@]} == 0)); then
  echo "install-prereqs: all present (${!PREREQ_PACKAGE[*]})"
  exit 0
fi
mapfile -t packages < <(printf '%s\n' "${packages[@]}" | sort -u)
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 || { echo "install-prereqs: need root or sudo to install ${packages[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
echo "install-prereqs: installing ${packages[*]}"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${packages[@]}"
