#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Shared by the integration tests: start a real controller and an emulating
# agent on 127.0.0.1 in a temporary folder, drive them with the real CLI,
# wait by polling with a deadline, and stop everything started here (by PID)
# whatever happens.
#
# A test script sets BIN (the build folder) and ROOT (the repository) from
# its arguments, sources this file, calls start_cluster, and uses `cohort`.
set -uo pipefail
# Nothing here reads the harness's stdin: srun and cohort run outside a job
# pass on a piped one (as Slurm's srun does), so a test pipes its input
# explicitly.
exec </dev/null

BIN=$(cd "${1:?usage: TEST BUILD_DIR REPO_ROOT}" && pwd)
ROOT=$(cd "${2:?usage: TEST BUILD_DIR REPO_ROOT}" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cohort-it.XXXXXX")
chmod 755 "$WORK"  # tests may run the agent and clients as other users
cd "$WORK"         # jobs submitted without -o write cohort-<id>.out here
PIDS=()
FAILURES=0

# stop_daemons: SIGTERM to every daemon started here, SIGKILL after 5 s.
stop_daemons() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  PIDS=()
}

# remove_agent_cgroups: the cgroup folders this test's agents logged
# (cgroups_enabled trees=…), and what is left running in them; an agent
# killed here never removed its own.
remove_agent_cgroups() {
  local tree pid
  for tree in $(sed -n 's/.*cgroups_enabled version=[0-9] trees=\([^ ]*\).*/\1/p' \
    "$WORK"/*.log 2>/dev/null | tr ',' '\n' | sed 's/^[a-z]*=//' | sort -u); do
    case "$tree" in /sys/fs/cgroup/*cohort-*) ;; *) continue ;; esac
    # What this test's jobs left running there (ranks that outlived a
    # killed agent) goes first: a cgroup with a process cannot be removed.
    for _ in $(seq 20); do
      for pid in $(find "$tree" -name cgroup.procs -exec cat {} + 2>/dev/null); do
        kill -9 "$pid" 2>/dev/null
      done
      find "$tree" -depth -type d -exec rmdir {} \; 2>/dev/null
      [ -d "$tree" ] || break
      sleep 0.1
    done
  done
}

cleanup() {
  stop_daemons
  stop_postgres
  remove_agent_cgroups
  # Ranks orphaned by a killed agent: tests that kill agents have their
  # ranks write their pid to $WORK/rank-pids.
  if [ -f "$WORK/rank-pids" ]; then
    while read -r pid; do kill -9 "$pid" 2>/dev/null; done <"$WORK/rank-pids"
  fi
  if [ "$FAILURES" -gt 0 ] || [ -n "${KEEP_WORK:-}" ]; then
    echo "--- controller log (last 40 lines)"; tail -40 "$WORK/controller.log" 2>/dev/null
    echo "--- agent log (last 40 lines)"; tail -40 "$WORK/agent.log" 2>/dev/null
    echo "work folder kept: $WORK"
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT
trap "exit 130" INT TERM

fail() { echo "FAIL: $*"; FAILURES=$((FAILURES + 1)); }
pass() { echo "ok: $*"; }

cohort() { "$BIN/cli/cohort" "$@"; }

# wait_until SECONDS COMMAND...: polls COMMAND until it succeeds or the
# deadline passes (returns 1 then).
wait_until() {
  local limit=$1; shift
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -ge "$deadline" ] && return 1
    sleep 0.1
  done
}

# job_state ID: prints the job's state (PENDING, RUNNING, COMPLETED, …).
job_state() {
  local json
  json=$(cohort show job "$1" --json 2>/dev/null) || return 0
  sed -n 's/.*"state": *"\([A-Z_]*\)".*/\1/p' <<<"$json" | head -1
}
state_is() { [ "$(job_state "$1")" = "$2" ]; }
# job_reason ID: prints the job's pending reason: None until a scheduling
# pass has looked at it (a held job's is JobHeldUser from its submission),
# then the pass's (Resources, Priority, ReqNodeNotAvail, …).
job_reason() {
  local json
  json=$(cohort show job "$1" --json 2>/dev/null) || return 0
  sed -n 's/.*"reason": *"\([A-Za-z]*\)".*/\1/p' <<<"$json" | head -1
}
# considered ID: whether a scheduling pass has decided about job ID: it left
# PENDING, or a pass gave it a reason. A check that a job did not start
# waits for this (wait_until), never for a fixed time.
considered() {
  local reason
  ! state_is "$1" PENDING && return 0
  reason=$(job_reason "$1")
  [ -n "$reason" ] && [ "$reason" != None ]
}
finished() { case "$(job_state "$1")" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL) return 0;; *) return 1;; esac; }

source "$ROOT/scripts/local_credentials.sh"

# make_tls: a cluster CA and the controller's certificate for 127.0.0.1 and
# localhost, as docs/operations.md#tls makes them, in $WORK/tls.
make_tls() {
  make_ca "$WORK/tls" "cohort test CA" &&
    sign_certificate "$WORK/tls" controller "IP:127.0.0.1,DNS:localhost" ||
    { fail "openssl could not make the test CA"; cat "$WORK/tls/openssl.log"; exit 1; }
}

# start_cluster [CLUSTER_CONF] [TOPOLOGY_CONF]: the demo cluster by default
# (16 nodes, 4 leaves), with users and agents proving who they are by
# MUNGE (a private munged; IT_AUTH=none: AuthType=none and the cluster key
# instead) and TLS on the controller's TCP port (IT_TLS=off: plain). Sets
# COHORT_CONTROLLER for the CLI. EXTRA_CONF: more lines.
start_cluster() {
  write_cluster_conf "$@"
  start_controller 0
  export COHORT_CONTROLLER="unix:$WORK/state/cohort.sock"
  export COHORT_CONF="$WORK/cohort.conf"
  start_agent
  wait_until 30 all_nodes_up || { fail "nodes did not register"; cohort nodes; exit 1; }
}

# write_cluster_conf [CLUSTER_CONF] [TOPOLOGY_CONF]: start_cluster's
# $WORK/cohort.conf (and munged, and the TLS files), without starting any
# daemon of Cohort's.
write_cluster_conf() {
  local cluster=${1:-$ROOT/etc/demo/cluster.conf}
  local topology=${2:-$ROOT/etc/demo/topology.conf}
  head -c 32 /dev/urandom | base64 >"$WORK/key"
  chmod 600 "$WORK/key"
  local auth="AuthType=none"
  if [ "${IT_AUTH:-munge}" = munge ]; then
    # A private munged, as every host of a real cluster runs one (the
    # system's is left alone).
    start_munged "$WORK/munge" || { fail "munged did not start"; exit 1; }
    PIDS+=("$MUNGED_PID")
    MUNGE_SOCKET="$WORK/munge/munge.socket"
    auth="AuthType=munge
AuthInfo=socket=$MUNGE_SOCKET
CohortUser=${AGENT_UID:-root}"
  fi
  local tls=""
  if [ "${IT_TLS:-on}" = on ]; then
    make_tls
    tls="TLSCertFile=$WORK/tls/controller.pem
TLSKeyFile=$WORK/tls/controller.key
TLSCAFile=$WORK/tls/ca.pem"
  fi
  cat >"$WORK/cohort.conf" <<CONF
StateDir=$WORK/state
AuthKeyFile=$WORK/key
$auth
$tls
ControllerAddr=127.0.0.1
ControllerPort=0
TopologyFile=$topology
${EXTRA_CONF:-}
Include=$cluster
CONF
}

# start_controller PORT: the controller on PORT (0: any free one, written to
# $WORK/port), its log appended to $WORK/controller.log.
start_controller() {
  rm -f "$WORK/port"
  local http=()
  # IT_HTTP=on: the HTTP port too, any free one, written to $WORK/http-port.
  [ "${IT_HTTP:-off}" = on ] && http=(--http-port 0 --http-port-file "$WORK/http-port")
  "$BIN/daemons/controller/cohort-controller" -c "$WORK/cohort.conf" --port "$1" \
    --port-file "$WORK/port" "${http[@]}" >>"$WORK/controller.log" 2>&1 &
  CONTROLLER_PID=$!
  PIDS+=("$CONTROLLER_PID")
  controller_ready() { test -s "$WORK/port" || ! kill -0 "$CONTROLLER_PID"; }
  wait_until 20 controller_ready
  test -s "$WORK/port" || { fail "controller did not start"; tail -5 "$WORK/controller.log"; exit 1; }
}

# web_base: the controller's HTTP port as a URL (https with TLS on; web
# verifies it with the test CA). web ARGS...: curl on it, silent.
web_base() {
  if [ "${IT_TLS:-on}" = on ]; then echo "https://127.0.0.1:$(cat "$WORK/http-port")"
  else echo "http://127.0.0.1:$(cat "$WORK/http-port")"; fi
}
web() {
  local ca=()
  [ "${IT_TLS:-on}" = on ] && ca=(--cacert "$WORK/tls/ca.pem")
  curl -s "${ca[@]}" "$@"
}

# crash_controller: kill -9, as a power cut or an OOM kill would.
crash_controller() {
  kill -9 "$CONTROLLER_PID"
  wait "$CONTROLLER_PID" 2>/dev/null
  local kept=()
  for pid in "${PIDS[@]}"; do [ "$pid" != "$CONTROLLER_PID" ] && kept+=("$pid"); done
  PIDS=("${kept[@]}")
}

# restart_controller: a new controller on the same port and state; agents
# reconnect to it by themselves.
restart_controller() {
  local port
  port=$(cat "$WORK/port")
  start_controller "$port"
}

# start_agent: one emulating agent for every node of the config; with
# AGENT_NODE set, one real agent for that node (this host, its own cores;
# with AGENT_HWLOC_XML, the layout of that hwloc XML file instead).
# It dials AGENT_CONTROLLERS when set, else the controller of $WORK/port.
start_agent() {
  local nodes
  nodes=$("$BIN/cli/cohort" config check -c "$WORK/cohort.conf" 2>/dev/null |
    sed -n 's/^nodes *\([0-9]*\) (\(.*\)),.*/\2/p')
  local count
  count=$("$BIN/cli/cohort" hostlist expand "$nodes" | wc -l)
  local as=()
  mkdir -p "$WORK/spool"
  if [ -n "${AGENT_UID:-}" ]; then
    # An unprivileged agent runs every rank as itself, whoever submitted it.
    chown "$AGENT_UID:$AGENT_UID" "$WORK/spool" "$WORK/key"
    as=(setpriv --reuid="$AGENT_UID" --regid="$AGENT_UID" --clear-groups)
  fi
  local which=(--emulate "$count" --nodes "$nodes")
  [ -n "${AGENT_NODE:-}" ] && which=(--node "$AGENT_NODE")
  # AGENT_HWLOC_XML: the real agent reads its node's layout from this file.
  [ -n "${AGENT_HWLOC_XML:-}" ] && which+=(--hwloc-xml "$AGENT_HWLOC_XML")
  # IT_HTTP=on: the agent's metrics too, on 127.0.0.1, its port in $WORK/agent-http-port.
  [ "${IT_HTTP:-off}" = on ] &&
    which+=(--http-port 0 --http-port-file "$WORK/agent-http-port" --http-address 127.0.0.1)
  "${as[@]}" "$BIN/daemons/agent/cohort-agent" -c "$WORK/cohort.conf" \
    --controller "${AGENT_CONTROLLERS:-127.0.0.1:$(cat "$WORK/port")}" "${which[@]}" \
    --spool "$WORK/spool" >>"$WORK/agent.log" 2>&1 &
  AGENT_PID=$!
  PIDS+=("$AGENT_PID")
}

# node_states: every node's state, one a line (read whole: with pipefail, a
# grep -q that stops early would fail the pipe).
node_states() {
  local json
  json=$(cohort nodes -N --json) || return 1
  sed -n '/"nodes"/,$ s/.*"state": *"\([A-Z_]*\)".*/\1/p' <<<"$json"
}
all_nodes_up() {
  local states
  states=$(node_states) || return 1
  [ -n "$states" ] && ! grep -Eq 'UNKNOWN|DOWN' <<<"$states"
}

# submit ARGS...: submits and prints the job id.
submit() { cohort submit "$@" | sed -n 's/^Submitted job \([0-9]*\)$/\1/p'; }

finish_test() {
  # A sanitizer build reports memory errors and leaks in the daemons' logs.
  stop_daemons
  if grep -lE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$WORK"/*.log 2>/dev/null; then
    fail "a sanitizer reported an error in the daemons (see the log above)"
    grep -hE -A30 "ERROR: (Address|Leak)Sanitizer|runtime error:" "$WORK"/*.log | head -60
  fi
  if [ "$FAILURES" -gt 0 ]; then
    echo "$FAILURES failed"
    exit 1
  fi
  echo "all checks passed"
  exit 0
}

# start_postgres: a real PostgreSQL 15 server of this test's own
# (scripts/pg_server.sh: its own folder, a Unix socket there, an
# unprivileged user when the test runs as root). Sets PG_CONNINFO for
# StateDatabase=.
PG_DIR=""
start_postgres() {
  PG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/cohort-pg.XXXXXX")
  # fsync off: the tests check the controllers, not the server's disk.
  PG_CONNINFO=$(bash "$ROOT/scripts/pg_server.sh" start "$PG_DIR" fsync=off) ||
    { fail "PostgreSQL did not start"; exit 1; }
}
stop_postgres() {
  [ -n "$PG_DIR" ] || return 0
  if [ "$FAILURES" -gt 0 ] || [ -n "${KEEP_WORK:-}" ]; then
    echo "--- PostgreSQL log (last 20 lines)"; tail -20 "$PG_DIR/server.log" 2>/dev/null
  fi
  bash "$ROOT/scripts/pg_server.sh" stop "$PG_DIR"
  PG_DIR=""
}

# use_netns_cluster: for a test on a cluster of separate hosts
# (scripts/netns-cluster.sh). Tries first what it needs of the host
# (network, UTS and mount namespaces, a bridge, a bind mount) and skips
# (77) with the reason when one is missing; then NET ($WORK/net) is the
# cluster's folder, `netns` runs the script, and the exit takes the
# cluster down before the usual cleanup.
use_netns_cluster() {
  local probe="cohort-probe-$$"
  if [ "$(id -u)" -ne 0 ] || ! ip netns add "$probe" 2>/dev/null; then
    echo "skip: this host cannot create network namespaces (needs root and iproute2's ip netns)"
    exit 77
  fi
  if ! ip -n "$probe" link add probe0 type bridge 2>/dev/null ||
    ! ip netns exec "$probe" unshare --uts --mount --propagation private \
      sh -c 'hostname probe && mount --bind /etc/hosts /etc/hosts' 2>/dev/null; then
    ip netns del "$probe"
    echo "skip: this host cannot make a bridge, or UTS and mount namespaces, in a network namespace"
    exit 77
  fi
  ip netns del "$probe"
  NET=$WORK/net
  trap 'netns down "$NET" >/dev/null 2>&1; cleanup' EXIT
}
netns() { BIN=$BIN bash "$ROOT/scripts/netns-cluster.sh" "$@"; }
