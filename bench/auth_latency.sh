#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/auth_latency.sh [BUILD_DIR] [RUNS] [ROUNDS]: what proving who you
# are costs a command. `cohort submit` wall time (bench/command_latency,
# spawn to exit) over the controller's Unix socket, over TCP with a MUNGE
# credential, and over TCP with MUNGE and TLS, in one sitting: ROUNDS rounds
# (default 3) of RUNS submissions (default 200) per way, the ways taking
# turns. Two controllers of the demo cluster (one serving TLS), no agent
# (jobs wait, as on a full cluster), a private munged and a test CA, all in
# a temporary folder on 127.0.0.1. Prints one line per round and way, then
# the median of the rounds' p50s per way and their ratios to the socket's.
# OTHER_COHORT=PATH adds another build of `cohort` (an older commit's, say)
# to each round, every way, for an A/B in the same sitting. KEYED_BUILD=DIR,
# the build folder of a commit from before MUNGE (eb87af4, where a TCP
# caller showed the cluster key), adds that build's controller and CLI over
# keyed plain TCP and over its socket: what proving who you are cost before.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-$root/build/default}" && pwd)
runs=${2:-200}
rounds=${3:-3}
work=$(mktemp -d "${TMPDIR:-/tmp}/cohort-auth-bench.XXXXXX")
chmod 755 "$work"
pids=()
stop() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap stop EXIT

source "$root/scripts/local_credentials.sh"
start_munged "$work/munge"
pids+=("$MUNGED_PID")
make_ca "$work/tls" "bench CA" && sign_certificate "$work/tls" controller "IP:127.0.0.1"

# controller NAME BUILD AUTH_LINES: BUILD's controller on a free port, with
# the demo cluster and AUTH_LINES; its port in $work/NAME.port.
controller() {
  local name=$1 build=$2 auth=$3
  cat >"$work/$name.conf" <<CONF
StateDir=$work/$name
$auth
ControllerAddr=127.0.0.1
TopologyFile=$root/etc/demo/topology.conf
Include=$root/etc/demo/cluster.conf
CONF
  "$build/daemons/controller/cohort-controller" -c "$work/$name.conf" --port 0 \
    --port-file "$work/$name.port" >"$work/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do [ -s "$work/$name.port" ] && break; sleep 0.1; done
  [ -s "$work/$name.port" ] || { cat "$work/$name.log" >&2; exit 1; }
}
munge="AuthType=munge
AuthInfo=socket=$work/munge/munge.socket"
controller plain "$bin" "$munge"
controller tls "$bin" "$munge
TLSCertFile=$work/tls/controller.pem
TLSKeyFile=$work/tls/controller.key
TLSCAFile=$work/tls/ca.pem"

ways=(socket tcp-munge tcp-munge-tls)
if [ -n "${KEYED_BUILD:-}" ]; then
  head -c 32 /dev/urandom | base64 >"$work/key"
  chmod 600 "$work/key"
  controller keyed "$KEYED_BUILD" "AuthKeyFile=$work/key"
  ways+=(keyed-socket keyed-tcp)
fi
declare -A conf=([socket]=plain [tcp-munge]=plain [tcp-munge-tls]=tls [keyed-socket]=keyed
  [keyed-tcp]=keyed)
declare -A target=(
  [socket]="unix:$work/plain/cohort.sock"
  [tcp-munge]="127.0.0.1:$(cat "$work/plain.port")"
  [tcp-munge-tls]="127.0.0.1:$(cat "$work/tls.port")"
  [keyed-socket]="unix:$work/keyed/cohort.sock"
  [keyed-tcp]="127.0.0.1:$(cat "$work/keyed.port" 2>/dev/null)")
declare -A p50s=()
clis=("$bin/cli/cohort")
[ -n "${OTHER_COHORT:-}" ] && clis+=("$OTHER_COHORT")
for round in $(seq "$rounds"); do
  for way in "${ways[@]}"; do
    way_clis=("${clis[@]}")
    [[ $way == keyed-* ]] && way_clis=("$KEYED_BUILD/cli/cohort")
    for cli in "${way_clis[@]}"; do
      key="$way $cli"
      result=$(COHORT_CONF="$work/${conf[$way]}.conf" COHORT_CONTROLLER="${target[$way]}" \
        "$bin/bench/command_latency" "$runs" "$cli" submit -N 1 -o /dev/null -- true)
      echo "round $round $key $result"
      p50s[$key]+="$(sed -n 's/.*"p50_ms": *\([0-9.]*\).*/\1/p' <<<"$result") "
    done
  done
done
median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
base=$(median <<<"${p50s[socket ${clis[0]}]}")
for way in "${ways[@]}"; do
  way_clis=("${clis[@]}")
  [[ $way == keyed-* ]] && way_clis=("$KEYED_BUILD/cli/cohort")
  for cli in "${way_clis[@]}"; do
    m=$(median <<<"${p50s[$way $cli]}")
    echo "median p50 $way $cli: $m ms ($(awk -v a="$m" -v b="$base" 'BEGIN { printf "%.2f", a / b }') x the socket's)"
  done
done
