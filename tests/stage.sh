#!/usr/bin/env bash
# The test stages, as the Makefile runs them: `gate` (make test), `chaos` (make chaos-test),
# `all` (make test-all). Extra arguments go to every pytest call.
#
# gate:  the unit tests first (two workers, with the disk layer's tests, which need FUSE but
#        no Docker), failing at the first failure, while the broker image builds beside
#        them; then the real-broker tests marked `integration`, one at a time (their
#        timings matter, and they share one cluster).
# chaos: the real-broker tests marked `chaos` (slow, repeated or old-release scenarios).
# pytest's exit 5 (no test collected) is a failure in every stage, never a quiet pass.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
stage=${1:?usage: tests/stage.sh gate|chaos|all [pytest args]}
shift

pytest_stage() {
  local name=$1
  shift
  "$BIN/python" -m pytest -ra "$@"
  local rc=$?
  if [ "$rc" -eq 5 ]; then
    echo "$name: pytest collected no tests" >&2
    return 1
  fi
  return "$rc"
}

image_log=$(mktemp -t kchaos-image.XXXXXX)
build_image() {
  "$BIN/kafka-chaos" image >"$image_log" 2>&1 &
  image_pid=$!
}
wait_image() {
  if ! wait "$image_pid"; then
    echo "the broker image could not be built:" >&2
    cat "$image_log" >&2
    return 1
  fi
  cat "$image_log"
}
trap 'rm -f "$image_log"' EXIT

gate() {
  build_image
  pytest_stage unit -x -n 2 --durations=15 tests/unit tests/integration/diskfs "$@"
  local unit=$?
  # Even after a unit failure the build is waited for: a build cut short leaves temporary
  # files and half-made layers behind.
  wait_image || return 1
  [ "$unit" -eq 0 ] || return 1
  pytest_stage integration -m integration --durations=25 tests/integration \
    --ignore=tests/integration/diskfs "$@"
}

chaos() {
  "$BIN/kafka-chaos" image || return 1
  pytest_stage chaos -m chaos --durations=25 tests/integration "$@"
}

case "$stage" in
  gate) gate "$@" ;;
  chaos) chaos "$@" ;;
  all) gate "$@" && chaos "$@" ;;
  *) echo "unknown stage '$stage': use gate, chaos or all" >&2; exit 2 ;;
esac
