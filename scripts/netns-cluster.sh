#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A Cohort cluster of separate hosts on one machine, for tests and for the
# curious. Every host runs in network, UTS and mount namespaces of its own:
# its own hostname, its own address on a bridge that exists only inside a
# namespace of its own (198.18.0.0/24, from RFC 2544's benchmarking range,
# which is never routed), its own munged with the cluster's key, its own
# certificate naming its address, and its own daemons. Names resolve through
# a hosts file written here and mounted over /etc/hosts on every host; each
# host's own files (cohort.conf, munge socket, spool, state) are mounted at
# one path, DIR/here, as /etc is on a real cluster. Nothing is added to the
# machine's own network namespace. Needs root.
#
#   netns-cluster.sh up DIR [NODES]    a controller host (ctl, 198.18.0.2), a
#                                      login host (login, .10) and NODES node
#                                      hosts (node01, .11, …; default 4),
#                                      under two leaf switches; with
#                                      STANDBY=1 also a PostgreSQL host (db,
#                                      .3) and a standby controller (ctl2, .4)
#   netns-cluster.sh run DIR HOST CMD…  CMD on HOST, as root, with COHORT_CONF
#   netns-cluster.sh cut DIR HOST      unplug HOST's cable (its link goes down)
#   netns-cluster.sh heal DIR HOST     plug it back in
#   netns-cluster.sh pids DIR HOST     every process on HOST
#   netns-cluster.sh stop DIR HOST     kill HOST's daemons and everything on it
#   netns-cluster.sh start DIR HOST    start HOST's daemons again
#   netns-cluster.sh down DIR          stop every host and remove the namespaces
#
# BIN: the build folder (default: build/default of this repository).
# EXTRA_CONF: more lines for cohort.conf. STANDBY=1 (at up): high
# availability, both controllers sharing db's PostgreSQL
# (CONTROLLER_TIMEOUT, default 5 s).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/build/default}
PORT=6820

usage() { sed -n '14,27p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
die() { echo "netns-cluster: $*" >&2; exit 1; }

# The address of a host: ctl .2, login .10, nodeNN .(10+NN).
address_of() {
  case "$1" in
    ctl) echo 198.18.0.2 ;;
    db) echo 198.18.0.3 ;;
    ctl2) echo 198.18.0.4 ;;
    login) echo 198.18.0.10 ;;
    node[0-9][0-9]) echo "198.18.0.$((10 + 10#${1#node}))" ;;
    *) die "no host $1 (ctl, ctl2, db, login, node01…)" ;;
  esac
}

load() {
  DIR=$(cd "${1:?usage: netns-cluster.sh COMMAND DIR …}" && pwd)
  [ -f "$DIR/cluster" ] || die "$DIR holds no cluster (run: netns-cluster.sh up $DIR)"
  # shellcheck source=/dev/null
  source "$DIR/cluster"
}

# in_host HOST CMD…: CMD in HOST's namespaces, beside its daemons.
in_host() {
  local host=$1
  shift
  local holder
  holder=$(cat "$DIR/hosts/$host/holder.pid")
  nsenter -t "$holder" -n -u -m -w"$DIR" -- env COHORT_CONF="$DIR/here/cohort.conf" "$@"
}

# The namespaces of a host: a process that holds them, in a netns of its
# own with one cable to the switch.
make_host() {
  local host=$1 address
  address=$(address_of "$host")
  local ns="$PREFIX-$host" own="$DIR/hosts/$host"
  mkdir -p "$own"
  chmod 755 "$own"
  ip netns add "$ns"
  ip -n "$SWITCH" link add "v-$host" type veth peer name eth0 netns "$ns"
  ip -n "$SWITCH" link set "v-$host" master br0 up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$address/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip netns exec "$ns" unshare --uts --mount --propagation private sh -c '
    hostname "$1" && mount --bind "$2/hosts/$1" "$2/here" && mount --bind "$2/hosts.txt" /etc/hosts &&
      touch "$2/here/.ready" && exec sleep infinity' _ "$host" "$DIR" \
    >"$own/holder.log" 2>&1 &
  echo $! >"$own/holder.pid"
  for _ in $(seq 50); do [ -f "$own/.ready" ] && return 0; sleep 0.1; done
  die "host $host did not come up: $(cat "$own/holder.log")"
}

# daemon HOST NAME CMD…: a daemon on HOST, its log HOST's NAME.log, its pid
# in NAME.pid.
daemon() {
  local host=$1 name=$2
  shift 2
  in_host "$host" "$@" >>"$DIR/hosts/$host/$name.log" 2>&1 &
  echo $! >"$DIR/hosts/$host/$name.pid"
}

start_host() {
  local host=$1 own="$DIR/hosts/$1"
  daemon "$host" munged munged --foreground --key-file="$DIR/munge.key" \
    --socket="$DIR/here/munge/munge.socket" --pid-file="$DIR/here/munge/munged.pid" \
    --log-file="$DIR/here/munge/munged.log" --seed-file="$DIR/here/munge/munged.seed"
  for _ in $(seq 100); do [ -S "$own/munge/munge.socket" ] && break; sleep 0.1; done
  [ -S "$own/munge/munge.socket" ] || die "munged on $host did not start: $(cat "$own/munged.log")"
  case "$host" in
    db)
      # PostgreSQL on db's own address, trusted from the cluster's network.
      in_host db env PG_HBA_EXTRA="host all all 198.18.0.0/24 trust" \
        bash "$ROOT/scripts/pg_server.sh" start "$own/pg" "listen_addresses=$(address_of db)" \
        fsync=off >/dev/null || die "PostgreSQL on db did not start: $(tail -5 "$own/pg/server.log")"
      ;;
    ctl)
      daemon "$host" controller "$BIN/daemons/controller/cohort-controller" \
        -c "$DIR/here/cohort.conf"
      for _ in $(seq 100); do
        in_host login "$BIN/cli/cohort" nodes >/dev/null 2>&1 && return 0
        sleep 0.2
      done
      die "the controller on ctl does not answer the login host: $(in_host login "$BIN/cli/cohort" nodes 2>&1 | tail -3)"
      ;;
    ctl2)
      daemon "$host" controller "$BIN/daemons/controller/cohort-controller" \
        -c "$DIR/here/cohort.conf"
      for _ in $(seq 100); do
        grep -q controller_standby "$own/controller.log" 2>/dev/null && return 0
        sleep 0.2
      done
      die "ctl2 did not stand by: $(tail -3 "$own/controller.log")"
      ;;
    node*)
      daemon "$host" agent "$BIN/daemons/agent/cohort-agent" -c "$DIR/here/cohort.conf" \
        --controller "$CONTROLLERS" --node "$host" --spool "$DIR/here/spool"
      ;;
  esac
}

# Kills what runs on HOST: its daemons and whatever they left (ranks of an
# agent that died), every process in its network namespace.
stop_host() {
  local host=$1 pid
  for pid in $(ip netns pids "$PREFIX-$host" 2>/dev/null); do
    [ "$pid" = "$(cat "$DIR/hosts/$host/holder.pid")" ] || kill -9 "$pid" 2>/dev/null || true
  done
}

host_conf() {
  local host=$1 own="$DIR/hosts/$1"
  mkdir -p "$own/munge" "$own/spool" "$own/state"
  chmod 755 "$own/munge" "$own/spool"
  chmod 700 "$own/state"
  # The same file on every host, as a cluster's /etc/cohort/cohort.conf;
  # the keys it names are on the hosts that need them alone.
  local ha="" cert=ctl
  [ "$host" = ctl2 ] && cert=ctl2
  if [ "$STANDBY" = 1 ]; then
    ha="StateBackend=postgresql
StateDatabase=\"host=$(address_of db) dbname=postgres user=cohort\"
ControllerTimeout=${CONTROLLER_TIMEOUT:-5}"
  fi
  cat >"$own/cohort.conf" <<CONF
ClusterName=netns
ControllerAddr=${CONTROLLERS//:$PORT/}
ControllerPort=$PORT
$ha
StateDir=$DIR/here/state
AuthType=munge
AuthInfo=socket=$DIR/here/munge/munge.socket
AuthKeyFile=$DIR/here/cluster.key
TLSCertFile=$DIR/tls/$cert.pem
TLSKeyFile=$DIR/here/controller.key
TLSCAFile=$DIR/tls/ca.pem
TopologyFile=$DIR/topology.conf
NodeTimeout=${NODE_TIMEOUT:-6}
${EXTRA_CONF:-}
NodeName=node[01-$NODES] CPUs=1 RealMemory=256
PartitionName=all Nodes=node[01-$NODES] Default=YES MaxTime=1:00:00
CONF
  install -m 600 "$DIR/cluster.key" "$own/cluster.key"
  case "$host" in
    ctl | ctl2) install -m 600 "$DIR/tls/$host.key" "$own/controller.key" ;;
    node*)
      # Each agent proves itself with a certificate naming its node.
      install -m 600 "$DIR/tls/$host.key" "$own/agent.key"
      printf 'AgentCertFile=%s\nAgentKeyFile=%s\n' "$DIR/tls/$host.pem" "$DIR/here/agent.key" \
        >>"$own/cohort.conf"
      ;;
  esac
}

up() {
  [ "$(id -u)" -eq 0 ] || die "needs root (network namespaces and mounts)"
  DIR=$(mkdir -p "$1" && cd "$1" && pwd)
  NODES=$(printf '%02d' "${2:-4}")
  [ "$((10#$NODES))" -ge 1 ] && [ "$((10#$NODES))" -le 64 ] || die "NODES: give 1-64"
  [ ! -f "$DIR/cluster" ] || die "$DIR holds a cluster already (netns-cluster.sh down $DIR)"
  for tool in ip nsenter unshare munged openssl; do
    command -v "$tool" >/dev/null || die "$tool is missing (scripts/install-deps.sh installs it)"
  done
  PREFIX="cohort-$(head -c 3 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  SWITCH="$PREFIX-switch"
  chmod 755 "$DIR"
  mkdir -p "$DIR/here" "$DIR/hosts" "$DIR/tls"
  STANDBY=${STANDBY:-0}
  CONTROLLERS="ctl:$PORT"
  [ "$STANDBY" = 1 ] && CONTROLLERS="ctl:$PORT,ctl2:$PORT"
  printf 'PREFIX=%s\nSWITCH=%s\nNODES=%s\nSTANDBY=%s\nCONTROLLERS=%s\n' "$PREFIX" "$SWITCH" \
    "$NODES" "$STANDBY" "$CONTROLLERS" >"$DIR/cluster"
  # A cluster that does not come up whole is taken down again.
  trap 'status=$?; [ $status -eq 0 ] || down "$DIR" >/dev/null 2>&1; exit $status' EXIT
  local hosts=(ctl login) i
  [ "$STANDBY" = 1 ] && hosts+=(db ctl2)
  for i in $(seq -w 1 "$NODES"); do hosts+=("node$(printf '%02d' "$((10#$i))")"); done
  echo "HOSTS=\"${hosts[*]}\"" >>"$DIR/cluster"
  {
    echo "127.0.0.1 localhost"
    for host in "${hosts[@]}"; do echo "$(address_of "$host") $host"; done
  } >"$DIR/hosts.txt"
  # The cluster's keys: MUNGE's, the agents', and a CA with a certificate
  # for every host naming its address.
  source "$ROOT/scripts/local_credentials.sh"
  head -c 1024 /dev/urandom >"$DIR/munge.key" && chmod 600 "$DIR/munge.key"
  head -c 32 /dev/urandom | base64 >"$DIR/cluster.key" && chmod 600 "$DIR/cluster.key"
  make_ca "$DIR/tls" "netns cluster CA" || die "openssl: $(cat "$DIR/tls/openssl.log")"
  for host in "${hosts[@]}"; do
    sign_certificate "$DIR/tls" "$host" "DNS:$host,IP:$(address_of "$host")" ||
      die "openssl: $(cat "$DIR/tls/openssl.log")"
  done
  local half=$(((10#$NODES + 1) / 2)) last
  last=$(printf '%02d' "$((10#$NODES))")
  {
    echo "SwitchName=leaf1 Nodes=node[01-$(printf '%02d' "$half")]"
    if [ "$half" -lt "$((10#$NODES))" ]; then
      echo "SwitchName=leaf2 Nodes=node[$(printf '%02d' "$((half + 1))")-$last]"
      echo "SwitchName=spine Switches=leaf[1-2]"
    fi
  } >"$DIR/topology.conf"
  ip netns add "$SWITCH"
  ip -n "$SWITCH" link add br0 type bridge
  ip -n "$SWITCH" link set br0 up
  for host in "${hosts[@]}"; do
    host_conf "$host"
    make_host "$host"
  done
  start_host login
  [ "$STANDBY" = 1 ] && start_host db
  start_host ctl
  [ "$STANDBY" = 1 ] && start_host ctl2
  for host in "${hosts[@]}"; do case "$host" in node*) start_host "$host" ;; esac; done
  for _ in $(seq 150); do
    local states
    states=$(in_host login "$BIN/cli/cohort" nodes --json 2>/dev/null |
      sed -n 's/.*"state": *"\([A-Z_]*\)".*/\1/p' | sort -u) || true
    if [ "$states" = IDLE ]; then
      echo "netns-cluster: up in $DIR: ${hosts[*]}"
      trap - EXIT
      return 0
    fi
    sleep 0.2
  done
  die "the nodes did not register: $(in_host login "$BIN/cli/cohort" nodes 2>&1)"
}

down() {
  load "$1"
  local host
  for host in $HOSTS; do
    stop_host "$host"
    kill -9 "$(cat "$DIR/hosts/$host/holder.pid")" 2>/dev/null || true
    ip netns del "$PREFIX-$host" 2>/dev/null || true
  done
  ip netns del "$SWITCH" 2>/dev/null || true
  rm -f "$DIR/cluster"
}

command=${1:-}
[ $# -ge 2 ] || usage
shift
case "$command" in
  up) up "$@" ;;
  down) down "$@" ;;
  run) load "$1"; in_host "${2:?run DIR HOST CMD…}" "${@:3}" ;;
  cut) load "$1"; ip -n "$SWITCH" link set "v-${2:?cut DIR HOST}" down ;;
  heal) load "$1"; ip -n "$SWITCH" link set "v-${2:?heal DIR HOST}" up ;;
  pids) load "$1"; ip netns pids "$PREFIX-${2:?pids DIR HOST}" ;;
  stop) load "$1"; stop_host "${2:?stop DIR HOST}" ;;
  start) load "$1"; start_host "${2:?start DIR HOST}" ;;
  *) usage ;;
esac
