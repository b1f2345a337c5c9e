# Sourced by the scripts that need commands beyond Go, gcc and git.
# require_commands CMD... fails, naming the Debian package of each missing
# command, unless all are on PATH. hack/install-prereqs.sh installs them.

# The Debian package of each command the scripts use.
declare -A PREREQ_PACKAGE=(
  [curl]=curl
  [openssl]=openssl
  [ss]=iproute2
  [flock]=util-linux
  [setsid]=util-linux
  [unshare]=util-linux # the Kueue test (v2/test/kueue) runs its manager in a mount namespace
  [update-ca-certificates]=ca-certificates # the CA bundle of the images (hack/images.sh)
)

require_commands() {
  local cmd missing=() packages=()
  for cmd in "$@"; do
    if ! command -v "${cmd}" >/dev/null 2>&1; then
      missing+=("${cmd}")
      packages+=("${PREREQ_PACKAGE[${cmd}]:-${cmd}}")
    fi
  done
  if ((${#missing[@]} > 0)); then
    echo "error: missing command(s): ${missing[*]}." >&2
    echo "  Install them with: apt-get install -y $(printf '%s\n' "${packages[@]}" | sort -u | tr '\n' ' ')" >&2
    echo "  or run hack/install-prereqs.sh (as root, or with sudo)." >&2
    return 1
  fi
}
