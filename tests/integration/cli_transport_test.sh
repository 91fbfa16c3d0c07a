#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The CLI reaches the controller every way a user can name it: the Unix
# socket, a numeric TCP address and a host name (resolved by c-ares from
# /etc/hosts), with the same answers; requests and answers
# larger than HTTP/2's first windows and frames; and clear errors when the
# controller cannot be reached or the caller cannot prove who they are
# (over TCP the CLI attaches a MUNGE credential from the test's munged).
source "$(dirname "$0")/lib.sh"
start_cluster
port=$(cat "$WORK/port")
me=$(id -u)
over() { local target=$1; shift; COHORT_CONTROLLER=$target "$@"; }

for target in "unix:$WORK/state/cohort.sock" "127.0.0.1:$port" "localhost:$port"; do
  id=$(over "$target" submit -N 2 -J "via-${target%%:*}" -o "$WORK/via-%j.out" -- echo reached)
  [ -n "$id" ] || { fail "submit over $target printed no job id"; continue; }
  wait_until 30 finished "$id" || fail "job $id (over $target) did not finish"
  show=$(over "$target" cohort show job "$id" --json)
  grep -q "\"state\": *\"COMPLETED\"" <<<"$show" || fail "over $target: $show"
  # Over the socket the controller reads the uid from it; over TCP from
  # the MUNGE credential that came with the call.
  grep -q "\"uid\": *$me," <<<"$show" || fail "over $target the owner is not $me: $show"
  [ "$(sort -u "$WORK/via-$id.out")" = reached ] || fail "job $id output: $(cat "$WORK/via-$id.out")"
  queue=$(over "$target" cohort queue -t all)
  grep -q "^$id " <<<"$queue" || fail "queue -t all over $target lacks $id: $queue"
done
pass "submit, show and queue answer alike over the socket, 127.0.0.1 and localhost"

# `cohort run` submits with a unary call and watches its job on a gRPC
# stream, on a second connection from a second thread.
for target in "unix:$WORK/state/cohort.sock" "127.0.0.1:$port" "localhost:$port"; do
  out=$(over "$target" cohort run -N 2 -- echo ran 2>&1)
  rc=$?
  [ "$rc" = 0 ] || fail "run over $target exited $rc: $out"
  [ "$(grep -c '^ran$' <<<"$out")" = 2 ] || fail "run over $target printed: $out"
done
pass "cohort run submits and follows its job over every way in"

# A 1 MiB batch script: the request outgrows the 64 KiB window a
# connection starts with and the 16 KiB frame; `show job` answers with the
# whole spec, script included, in as many frames.
{
  echo '#!/bin/sh'
  for _ in $(seq 8192); do printf '# %0126d\n' 0; done
  echo 'echo "big script ran"'
} >"$WORK/big.sh"
for target in "unix:$WORK/state/cohort.sock" "127.0.0.1:$port" "localhost:$port"; do
  id=$(over "$target" submit -N 1 -o "$WORK/big-%j.out" "$WORK/big.sh")
  [ -n "$id" ] || { fail "the 1 MiB script over $target was not submitted"; continue; }
  wait_until 30 finished "$id" || fail "big-script job $id did not finish"
  [ "$(cat "$WORK/big-$id.out" 2>/dev/null)" = "big script ran" ] ||
    fail "big-script job $id (over $target): $(cat "$WORK/big-$id.out" 2>&1)"
  show=$(over "$target" cohort show job "$id")
  grep -q "BatchScript=YES" <<<"$show" || fail "show job $id over $target: $show"
done
pass "a 1 MiB script goes to the controller and back over every way in"

# Over TCP without a credential the controller believes no uid: a client
# whose config names no reachable munged goes anonymous (AuthType unset)
# and is refused saying why; with AuthType=munge it says munged is missing.
cat >"$WORK/no-munge.conf" <<CONF
StateDir=$WORK/state
AuthInfo=socket=$WORK/no-munged.socket
$(grep "^TLS" "$WORK/cohort.conf")
CONF
for target in "127.0.0.1:$port" "localhost:$port"; do
  out=$(COHORT_CONF="$WORK/no-munge.conf" over "$target" cohort submit -N 1 -- true 2>&1) &&
    fail "a submit without a credential over $target was accepted: $out"
  grep -q "needs an identity.*no MUNGE credential.*munged" <<<"$out" ||
    fail "credential-less over $target: $out"
  COHORT_CONF="$WORK/no-munge.conf" over "$target" cohort queue >/dev/null ||
    fail "an anonymous caller over $target could not read the queue"
done
echo "AuthType=munge" >>"$WORK/no-munge.conf"
out=$(COHORT_CONF="$WORK/no-munge.conf" over "127.0.0.1:$port" cohort queue 2>&1) &&
  fail "AuthType=munge without munged answered: $out"
grep -q "munged does not answer on $WORK/no-munged.socket.*AuthInfo=socket=" <<<"$out" ||
  fail "AuthType=munge without munged: $out"
pass "over TCP without a MUNGE credential a submit is refused and says why"

# Nothing there: exit 1 and a message that says where and what to do.
# (munged stays up: a missing munged is said first, as above.)
out=$(cohort queue --controller "unix:$WORK/nowhere.sock" 2>&1)
rc=$?
[ "$rc" = 1 ] || fail "queue at a missing socket exited $rc"
grep -q "cannot reach the controller at unix:$WORK/nowhere.sock.*No such file.*COHORT_CONTROLLER" \
  <<<"$out" || fail "missing socket: $out"
crash_controller
out=$(over "127.0.0.1:$port" cohort queue 2>&1) && fail "queue with the controller stopped: $out"
grep -q "cannot reach the controller at 127.0.0.1:$port.*refused.*is cohort-controller running" \
  <<<"$out" || fail "stopped controller over TCP: $out"
pass "an unreachable controller is reported with its address and what to do"
finish_test
