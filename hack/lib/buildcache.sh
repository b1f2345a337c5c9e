#!/usr/bin/env bash
# Sourced by the scripts that build tools from the Go module proxy into a
# cache directory of their own (hack/testbin.sh, hack/kueue.sh): their
# shared command line, one build at a time per directory, a scratch
# directory inside it, and a field of a module's download record.
# shellcheck disable=SC2034  # WORK is the caller's

# cache_args <dir> [args...]: --print-dir prints <dir> and exits 0; any
# other argument is a usage error (exit 2); no argument returns.
cache_args() {
  local dir="$1"
  shift
  if [[ "${1:-}" == "--print-dir" ]]; then
    echo "${dir}"
    exit 0
  elif [[ $# -gt 0 ]]; then
    echo "usage: $0 [--print-dir]" >&2
    exit 2
  fi
}

# cache_begin <dir> <log tag>: takes <dir>/.lock on file descriptor 9 for
# the rest of the script, so that a second caller waits for the first
# build; then clears what an interrupted build left in <dir>/.build (we
# hold the lock) and sets WORK to a new scratch directory there, removed
# on exit, on INT and on TERM.
cache_begin() {
  local dir="$1" tag="$2"
  mkdir -p "${dir}"
  exec 9>"${dir}/.lock"
  if ! flock -n 9; then
    echo "[${tag} $(date +%H:%M:%S)] another $0 is building in ${dir}; waiting for it" >&2
    flock 9
  fi
  rm -rf "${dir}/.build"
  mkdir -p "${dir}/.build"
  WORK="$(mktemp -d "${dir}/.build/tmp.XXXXXX")"
  trap 'rm -rf "${WORK}"' EXIT
  trap 'exit 130' INT TERM # run the EXIT trap on these too
}

# mod_json_field <module@version> <field>: a string field of
# `go mod download -json` (Dir, GoMod, ...), run in WORK, away from any
# module of the caller.
mod_json_field() {
  local out
  out="$(cd "${WORK}" && GOFLAGS=-buildvcs=false go mod download -json "$1")"
  sed -n "s/^[[:space:]]*\"$2\": \"\\(.*\\)\",\\{0,1\\}\$/\\1/p" <<<"${out}" | head -n1
}
