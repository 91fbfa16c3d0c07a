#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The adversarial suite: what a user on a login node, a rogue host or a
# stray agent can and cannot do to a cluster whose users and agents prove
# who they are with MUNGE (a private munged). Users call over TCP, as from a
# login node. As root the test creates three users (two members of
# different accounts and an operator); otherwise only the checks that need
# no second user run.
source "$(dirname "$0")/lib.sh"

ALICE_UID=61021
BOB_UID=61022
OPER_UID=61023
created=()
multi_user=""
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null && command -v useradd >/dev/null; then
  multi_user=yes
  for uid in $ALICE_UID $BOB_UID $OPER_UID; do
    if ! getent passwd "$uid" >/dev/null; then
      useradd -u "$uid" -U -M -d /nonexistent -s /bin/sh "cohortsec$uid" && created+=("cohortsec$uid")
    fi
  done
fi
ALICE=$(getent passwd $ALICE_UID | cut -d: -f1)
BOB=$(getent passwd $BOB_UID | cut -d: -f1)
OPER=$(getent passwd $OPER_UID | cut -d: -f1)
remove_users() { for user in "${created[@]}"; do userdel "$user" 2>/dev/null; done; }
trap 'remove_users; cleanup' EXIT

EXTRA_CONF="Operators=${OPER:-nobody}
PrivateData=jobs,usage
AccountName=physics Users=${BOB:-nobody}
QOSName=urgent Priority=100 AllowAccounts=physics"
start_cluster
port=$(cat "$WORK/port")
mkdir -m 1777 "$WORK/out"

# tcp CMD...: the CLI over TCP, as from a login node. as UID CMD...: as a user.
tcp() { COHORT_CONTROLLER="127.0.0.1:$port" "$BIN/cli/cohort" "$@"; }
as() {
  local uid=$1; shift
  setpriv --reuid="$uid" --regid="$(id -g "$uid")" --init-groups \
    env COHORT_CONTROLLER="127.0.0.1:$port" COHORT_CONF="$WORK/cohort.conf" "$BIN/cli/cohort" "$@"
}
submitted() { sed -n 's/^Submitted job \([0-9]*\)$/\1/p'; }

# Root's job on node01, with a secret in its environment.
secret="s3cr3t-$RANDOM$RANDOM"
root_job=$(SECRET_TOKEN=$secret tcp submit -N 1 -w node01 -J rootjob -o "$WORK/out/%j.out" -- sleep 300 |
  submitted)
[ -n "$root_job" ] || { fail "root could not submit over TCP with MUNGE"; finish_test; }
wait_until 30 state_is "$root_job" RUNNING || fail "root's job $root_job did not start"
grep -q "\"uid\": *0," <<<"$(tcp show job "$root_job" --json)" || fail "root's job is not root's"
pass "root submits over TCP with a MUNGE credential"

# An anonymous caller (no munged reachable: the CLI attaches nothing) may
# not submit, cancel or drain.
tls_lines=$(grep "^TLS" "$WORK/cohort.conf")
cat >"$WORK/anonymous.conf" <<CONF
StateDir=$WORK/state
AuthInfo=socket=$WORK/no-munged.socket
$tls_lines
CONF
anon() { COHORT_CONF="$WORK/anonymous.conf" tcp "$@"; }
for action in "submit -N 1 -- true" "cancel $root_job" "drain node02 --reason x"; do
  # shellcheck disable=SC2086
  out=$(anon $action 2>&1) && fail "anonymous '$action' was accepted: $out"
  grep -q "needs an identity.*no MUNGE credential" <<<"$out" || fail "anonymous '$action': $out"
done
state_is "$root_job" RUNNING || fail "an anonymous cancel stopped root's job"
pass "an anonymous TCP caller cannot submit, cancel or drain"

# A rogue munged with a key of its own (root on the attacker's machine)
# vouches for uid 0: the controller's munged refuses the credential.
rogue="$WORK/rogue"
start_munged "$rogue" || fail "the rogue munged did not start"
PIDS+=("$MUNGED_PID")
cat >"$WORK/rogue.conf" <<CONF
StateDir=$WORK/state
AuthType=munge
AuthInfo=socket=$rogue/munge.socket
$tls_lines
Include=$ROOT/etc/demo/cluster.conf
CONF
out=$(COHORT_CONF="$WORK/rogue.conf" tcp cancel "$root_job" 2>&1) &&
  fail "a forged credential cancelled root's job: $out"
grep -q "needs an identity.*MUNGE credential refused" <<<"$out" || fail "forged credential: $out"
state_is "$root_job" RUNNING || fail "a forged cancel stopped root's job"
pass "a credential from a munged with another key is refused: a forged uid 0 cannot cancel"

# TLS: a client that speaks plain HTTP/2 to the TLS port, or that trusts
# another CA, gets nothing; `config check` finds a key that is not the
# certificate's.
if grep -q "^TLSCertFile=" "$WORK/cohort.conf"; then
  other="$WORK/other-ca"
  make_ca "$other" other || fail "openssl: $(cat "$other/openssl.log")"
  grep -v "^TLS" "$WORK/cohort.conf" >"$WORK/plain.conf"
  out=$(COHORT_CONF="$WORK/plain.conf" tcp queue 2>&1) && fail "a plain client was answered: $out"
  grep -q "closed the connection" <<<"$out" || fail "a plain client to the TLS port: $out"
  sed "s|^TLSCAFile=.*|TLSCAFile=$other/ca.pem|" "$WORK/cohort.conf" >"$WORK/other-ca.conf"
  out=$(COHORT_CONF="$WORK/other-ca.conf" tcp queue 2>&1) && fail "another CA was trusted: $out"
  grep -q "certificate was not accepted: \(unable to get local issuer\|self-signed certificate in\)" <<<"$out" ||
    fail "a client trusting another CA: $out"
  sed "s|^TLSKeyFile=.*|TLSKeyFile=$other/ca.key|" "$WORK/cohort.conf" >"$WORK/bad-key.conf"
  out=$("$BIN/cli/cohort" config check -c "$WORK/bad-key.conf" 2>&1) && fail "config check took a wrong key"
  grep -q "TLSKeyFile=$other/ca.key is not the key of TLSCertFile=" <<<"$out" ||
    fail "config check with a wrong key: $out"
  out=$("$BIN/cli/cohort" config check -c "$WORK/cohort.conf" 2>&1) || fail "config check: $out"
  grep -q "tls        on: certificate for 127.0.0.1,localhost until" <<<"$out" || fail "config check: $out"
  pass "TLS: plain clients and other CAs get nothing; config check finds a wrong key"
fi

# Agents: a wrong credential, none (the cluster key of AuthType=none), and
# a second agent claiming node01 while its agent is connected are refused,
# and node01's job keeps running.
other_agent() { # CONFIG NODE LOG
  "$BIN/daemons/agent/cohort-agent" -c "$1" --controller "127.0.0.1:$port" --emulate 1 \
    --nodes "$2" --spool "$WORK/spool-$3" >>"$WORK/$3.log" 2>&1 &
  PIDS+=("$!")
  echo "$!"
}
refused_in_log() { grep -q "agent_refused node=$1 .*$2" "$WORK/controller.log"; }
cat >"$WORK/keyed.conf" <<CONF
AuthType=none
AuthKeyFile=$WORK/key
$tls_lines
Include=$ROOT/etc/demo/cluster.conf
CONF
for case in "rogue.conf node02 MUNGE credential refused" \
  "keyed.conf node03 no MUNGE credential" \
  "cohort.conf node01 node already connected"; do
  read -r conf node why <<<"$case"
  pid=$(other_agent "$WORK/$conf" "$node" "agent-${conf%.conf}")
  wait_until 20 refused_in_log "$node" "$why" || fail "agent ($conf) for $node was not refused: $why"
  kill "$pid" 2>/dev/null
done
state_is "$root_job" RUNNING || fail "node01's job stopped after a second agent claimed node01"
all_nodes_up || fail "a refused agent took a node down"
pass "agents with a wrong credential, with none, or claiming a connected node are refused"

if [ -n "$multi_user" ]; then
  # A user cannot cancel root's job, nor see it (PrivateData=jobs), nor its
  # environment; refusals say who may.
  out=$(as $ALICE_UID cancel "$root_job" 2>&1) && fail "alice cancelled root's job: $out"
  grep -q "belongs to root" <<<"$out" || fail "alice cancelling root's job: $out"
  out=$(as $ALICE_UID show job "$root_job" --json 2>&1) && fail "alice saw root's job: $out"
  grep -q "PrivateData=jobs shows a job only to its owner, root and Operators=" <<<"$out" ||
    fail "alice showing root's job: $out"
  grep -q "$secret" <<<"$out" && fail "alice read root's environment"
  listing=$(as $ALICE_UID queue -a 2>&1)
  grep -q "^$root_job " <<<"$listing" && fail "alice's queue -a lists root's job: $listing"
  out=$(tcp show job "$root_job" --json)
  grep -q "$secret" <<<"$out" && fail "show job hands out the job's environment: $out"
  pass "a user cannot cancel, see or read the environment of root's job"

  # Accounts and QOS: alice is not in physics; bob is, and may use urgent.
  out=$(as $ALICE_UID submit -A physics -o "$WORK/out/%j.out" -- true 2>&1) &&
    fail "alice charged physics: $out"
  grep -q "$ALICE is not a member of account physics; its members are $BOB" <<<"$out" ||
    fail "alice -A physics: $out"
  out=$(as $ALICE_UID submit --qos urgent -o "$WORK/out/%j.out" -- true 2>&1) &&
    fail "alice used QOS urgent: $out"
  grep -q "QOS urgent is for accounts physics" <<<"$out" || fail "alice --qos urgent: $out"
  bob_job=$(as $BOB_UID submit -A physics --qos urgent -o "$WORK/out/%j.out" -- sleep 300 | submitted)
  [ -n "$bob_job" ] || fail "bob could not submit to physics with QOS urgent"
  alice_job=$(as $ALICE_UID submit -o "$WORK/out/%j.out" -- sleep 300 | submitted)
  [ -n "$alice_job" ] || fail "alice could not submit a plain job"
  grep -q "\"account\": *\"physics\"" <<<"$(tcp show job "$bob_job" --json)" ||
    fail "bob's job is not charged to physics"
  pass "-A must be an account of the user's, and a QOS its allowed accounts'"

  # Users see only their own jobs and usage; they cannot drain.
  listing=$(as $BOB_UID queue -a 2>&1)
  grep -q "^$alice_job " <<<"$listing" && fail "bob's queue -a lists alice's job: $listing"
  grep -q "^$bob_job " <<<"$listing" || fail "bob's queue lacks his job: $listing"
  out=$(as $ALICE_UID drain node04 --reason mine 2>&1) && fail "alice drained node04: $out"
  grep -q "root and Operators=" <<<"$out" || fail "alice draining: $out"
  out=$(as $ALICE_UID cancel "$bob_job" 2>&1) && fail "alice cancelled bob's job: $out"
  pass "users see only their own jobs and cannot drain or cancel others'"

  # The operator may drain, resume and cancel anyone's job, and sees all.
  as $OPER_UID drain node04 --reason maintenance >/dev/null || fail "the operator could not drain"
  as $OPER_UID resume node04 >/dev/null || fail "the operator could not resume"
  listing=$(as $OPER_UID queue -a 2>&1)
  grep -q "^$alice_job " <<<"$listing" || fail "the operator's queue -a lacks alice's job: $listing"
  as $OPER_UID cancel "$alice_job" "$bob_job" >/dev/null || fail "the operator could not cancel"
  wait_until 30 finished "$alice_job" || fail "alice's job did not end after the operator's cancel"
  pass "Operators= may drain, resume, see and cancel every job"
else
  echo "skip: the per-user checks need root, setpriv and useradd"
fi

# An agent may prove itself by a client certificate of the cluster's CA
# instead of MUNGE. The agent dies (kill -9) and comes back without a
# munged, with a certificate naming node[01-16]: it registers every node
# and adopts root's running job. A certificate naming another node is
# refused.
if grep -q "^TLSCAFile=" "$WORK/cohort.conf"; then
  sans=$("$BIN/cli/cohort" hostlist expand 'node[01-16]' | sed 's/^/DNS:/' | paste -sd,)
  sign_certificate "$WORK/tls" agents "$sans" && sign_certificate "$WORK/tls" stray "DNS:node05" ||
    fail "openssl: $(cat "$WORK/tls/openssl.log")"
  cert_conf() { # NAME
    sed "s|^AuthInfo=.*|AuthInfo=socket=$WORK/no-munged.socket|" "$WORK/cohort.conf" >"$WORK/$1.conf"
    printf 'AgentCertFile=%s\nAgentKeyFile=%s\n' "$WORK/tls/$1.pem" "$WORK/tls/$1.key" >>"$WORK/$1.conf"
  }
  cert_conf agents
  cert_conf stray
  registrations=$(grep -c "agent_registered" "$WORK/controller.log")
  kill -9 "$AGENT_PID"
  wait "$AGENT_PID" 2>/dev/null
  "$BIN/daemons/agent/cohort-agent" -c "$WORK/agents.conf" --controller "127.0.0.1:$port" \
    --emulate 16 --nodes 'node[01-16]' --spool "$WORK/spool" >>"$WORK/agent.log" 2>&1 &
  AGENT_PID=$!
  PIDS+=("$AGENT_PID")
  registered_by_cert() {
    [ "$(grep -c "agent_registered" "$WORK/controller.log")" -ge $((registrations + 16)) ]
  }
  wait_until 30 registered_by_cert || fail "the agent with a certificate did not register its nodes"
  wait_until 30 all_nodes_up || fail "nodes are not up after the agent came back with a certificate"
  state_is "$root_job" RUNNING || fail "root's job did not survive the agent's return"
  pid=$(other_agent "$WORK/stray.conf" node02 agent-stray)
  wait_until 20 refused_in_log node02 "certificate names node05, not node node02" ||
    fail "an agent whose certificate names node05 registered node02"
  kill "$pid" 2>/dev/null
  pass "an agent proves itself by a certificate of the cluster CA, for the nodes it names only"
fi

# Garbage, half an HTTP/2 preface, a 50 MB message and 500 idle
# connections: the controller keeps answering and its memory stays bounded.
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$CONTROLLER_PID/status"; }
before=$(rss)
# (The controller hangs up on each: SIGPIPE is ignored where they are written.)
(
  trap '' PIPE
  head -c 1000000 /dev/urandom >/dev/tcp/127.0.0.1/"$port"
  printf 'PRI * HTTP/2.0\r\n' >/dev/tcp/127.0.0.1/"$port"
  { printf 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'; head -c $((50 * 1024 * 1024)) /dev/zero; } \
    >/dev/tcp/127.0.0.1/"$port"
) 2>/dev/null
# The CLI refuses to send a request the controller would refuse.
{ echo '#!/bin/sh'; head -c $((50 * 1024 * 1024)) /dev/zero | tr '\0' '#'; } >"$WORK/huge.sh"
out=$(tcp submit -N 1 "$WORK/huge.sh" 2>&1) && fail "a 50 MB script was accepted: $out"
echo "a 50 MB script: $out"
grep -q "the request is 50.0 MiB, larger than the 4 MiB the controller takes" <<<"$out" ||
  fail "the 50 MB script: $out"
rm -f "$WORK/huge.sh"
idle=()
for _ in $(seq 500); do
  exec {fd}<>/dev/tcp/127.0.0.1/"$port" || break
  idle+=("$fd")
done
[ "${#idle[@]}" = 500 ] || fail "only ${#idle[@]} idle connections opened"
tcp queue >/dev/null || fail "the controller did not answer with 500 idle connections open"
for fd in "${idle[@]}"; do exec {fd}<&-; done
after=$(rss)
echo "controller RSS: ${before} kB before, ${after} kB after"
[ $((after - before)) -lt 200000 ] || fail "the controller grew by $((after - before)) kB"
tcp queue >/dev/null || fail "the controller stopped answering"
pass "garbage, a half preface, a 50 MB message and 500 idle connections leave it answering"

tcp cancel "$root_job" >/dev/null || fail "root could not cancel its own job"
finish_test
