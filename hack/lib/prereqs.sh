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
  [mpirun]=openmpi-bin    # the real MPI run of test/mpi
  [mpicc]=libopenmpi-dev  # builds that test's MPI program
  [update-ca-certificates]=ca-certificates # the CA bundle of the images (hack/images.sh)
)

# The Debian package of each Python module that Debian's own python3
# (/usr/bin/python3, not a pyenv shim) must import: the SDK's generator
# (hack/sdkgen) and its tests (sdk/python/run-tests.sh).
declare -A PREREQ_PYTHON_PACKAGE=(
  [yaml]=python3-yaml
  [kubernetes]=python3-kubernetes
  [pytest]=python3-pytest
  [pip]=python3-pip
  [setuptools]=python3-setuptools
  [wheel]=python3-wheel
  [ensurepip]=python3-venv # python3 -m venv needs it to put pip into a venv
)

# missing_python_packages: the Debian packages of the modules in
# PREREQ_PYTHON_PACKAGE that /usr/bin/python3 cannot import, one a line.
missing_python_packages() {
  local mod
  for mod in "${!PREREQ_PYTHON_PACKAGE[@]}"; do
    /usr/bin/python3 -c "import ${mod}" >/dev/null 2>&1 || echo "${PREREQ_PYTHON_PACKAGE[${mod}]}"
  done
}

# require_python_modules fails, naming the Debian packages to install,
# unless /usr/bin/python3 imports every module of PREREQ_PYTHON_PACKAGE.
require_python_modules() {
  local packages
  packages="$(missing_python_packages | sort -u | tr '\n' ' ')"
  if [[ -n "${packages}" ]]; then
    echo "error: /usr/bin/python3 lacks Python modules. Install them with: apt-get install -y ${packages}" >&2
    echo "  or run hack/install-prereqs.sh (as root, or with sudo)." >&2
    return 1
  fi
}

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
