# Shared by the server's test scripts (sourced): paths, a temporary folder, the processes to kill
# on exit, pass/fail counters, and waiting for a server's "listening on" line.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tiny="$root/tests/fixtures/vision/tiny"
tmp="$(mktemp -d)"
pids=()
# TERM first, so that Xvfb removes its lock file and socket; then KILL what is left
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  sleep 0.2
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
# listening_port LOG PID: the port a server printed (waits up to 30 s); empty if it died first
listening_port() {
  local p
  for _ in $(seq 1 300); do
    p=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$1")
    [ -n "$p" ] && { echo "$p"; return 0; }
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
