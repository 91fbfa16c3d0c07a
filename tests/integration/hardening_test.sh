#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The controller against a hostile user, a hostile anonymous client and an
# unlucky operator, on a cluster with MUNGE and TLS: every refusal is clear
# and the controller keeps serving. Each part is a defect once found:
# counts that sized memory before they were bounded, HTTP/2 floods, file
# descriptors run out, an agent paused past NodeTimeout, state readable by
# others, the submitter's umask ignored, a full disk, TLS handshakes that
# never finish, strings of any length. (A lying agent is agent_hub_test's;
# oversized fields of every request are request_bounds_test's.)
source "$(dirname "$0")/lib.sh"

# A small disk of its own for StateDir, where this host lets root mount one:
# the full-disk part fills it. Made before the cluster so the state is there.
TMPFS=""
if [ "$(id -u)" -eq 0 ] && mkdir -p "$WORK/state" &&
  mount -t tmpfs -o size=24m,mode=0711 cohort-hardening "$WORK/state" 2>/dev/null; then
  TMPFS="$WORK/state"
fi
trap 'stop_daemons; [ -n "$TMPFS" ] && umount "$TMPFS" 2>/dev/null; cleanup' EXIT

EXTRA_CONF="NodeTimeout=6" IT_HTTP=on start_cluster
port=$(cat "$WORK/port")
http_port=$(cat "$WORK/http-port")
# metric NAME: the controller's /metrics sample of NAME (no labels).
metric() { web "$(web_base)/metrics" | awk -v name="$1" '$1 == name {print $2}'; }
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$CONTROLLER_PID/status"; }
serving() { kill -0 "$CONTROLLER_PID" 2>/dev/null && cohort nodes >/dev/null 2>&1; }
over_tcp() { COHORT_CONTROLLER="127.0.0.1:$port" "$@"; }
flood() { timeout 60 python3 "$ROOT/tests/integration/h2_flood.py" "$@"; }

# 1. Counts are bounded before anything is sized by them.
for tasks in 2147483647 100000000; do
  out=$(cohort submit -N 1 --ntasks-per-node "$tasks" -- true 2>&1) && fail "ntasks $tasks accepted"
  grep -q "ntasks-per-node is $tasks; at most 4096" <<<"$out" || fail "ntasks $tasks: $out"
done
token=$(cohort token | sed -n 's/^COHORT_TOKEN=//p')
out=$(web -X POST -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
  --data-binary '{"spec": {"argv": ["true"], "nodes": 1, "tasks_per_node": 2147483647}}' \
  -w '\n%{http_code}' "$(web_base)/api/v1/jobs")
[ "$(tail -1 <<<"$out")" = 400 ] && grep -q "at most 4096" <<<"$out" || fail "REST ntasks: $out"
serving || { fail "the controller stopped serving after huge counts"; exit 1; }
pass "ntasks-per-node 2147483647 is refused with its bound, over the CLI and REST"

# 10. Every user-given string has a bound.
out=$(cohort submit -N 1 --hold --comment "$(head -c 100000 /dev/zero | tr '\0' c)" -- true 2>&1) &&
  fail "a 100 kB comment was accepted"
grep -q "spec.comment is 100000 bytes long; at most 1024" <<<"$out" || fail "comment: $out"
out=$(cohort submit -N 1 --hold -J "$(printf 'n%.0s' $(seq 300))" -- true 2>&1) &&
  fail "a 300-byte name was accepted"
grep -q "spec.name is 300 bytes long" <<<"$out" || fail "name: $out"
out=$(web -X POST -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
  --data-binary '{"spec": {"argv": ["true"], "nodes": 1, "open_mode": "../../x"}}' \
  -w '\n%{http_code}' "$(web_base)/api/v1/jobs")
[ "$(tail -1 <<<"$out")" = 400 ] && grep -q "give append or truncate" <<<"$out" ||
  fail "REST open_mode: $out"
pass "a 100 kB comment, a 300-byte name and open_mode ../../x are refused, naming the bound"

# 7. The submitter's umask: the job's output and the job itself.
id=$( (umask 077 && submit -N 1 -o "$WORK/umask-%j.out" -- sh -c 'umask; echo "$SLURM_UMASK"'))
wait_until 30 finished "$id" || fail "umask job $id did not finish"
[ "$(stat -c %a "$WORK/umask-$id.out" 2>/dev/null)" = 600 ] ||
  fail "with umask 077 the output is mode $(stat -c %a "$WORK/umask-$id.out" 2>&1)"
[ "$(tr '\n' ' ' <"$WORK/umask-$id.out")" = "0077 0077 " ] ||
  fail "the job ran with umask: $(cat "$WORK/umask-$id.out")"
pass "with umask 077 the job runs with 0077 (SLURM_UMASK too) and its output is 0600"

# 6. State files are the controller's user's alone.
for file in state.db state.db-wal; do
  mode=$(stat -c %a "$WORK/state/$file" 2>/dev/null)
  [ "$mode" = 600 ] || fail "$file is mode $mode, not 600"
done
[ $(($(stat -c 0%a "$WORK/state") & 022)) = 0 ] || fail "StateDir is mode $(stat -c %a "$WORK/state")"
mkdir -m 0777 "$WORK/open-state"
chmod 0777 "$WORK/open-state"
out=$(timeout 20 "$BIN/daemons/controller/cohort-controller" -c "$WORK/cohort.conf" --port 0 \
  --state-dir "$WORK/open-state" 2>&1) && fail "a controller started on a StateDir others may write"
grep -q "may be written by other users (mode 0777); run chmod go-w" <<<"$out" ||
  fail "open StateDir: $out"
pass "state.db and its log are 0600, and a StateDir others may write is refused"

# 2. HTTP/2 abuse from an anonymous TLS client on the TCP port (each kind
# from an address of its own: one that passes a bound may not come back
# for 10 s), and from a user on the local socket: the controller's memory
# stays bounded, the abuser is told why, and everyone else is answered.
before=$(rss_kib)
source_host=10
for kind in continuation reset streams headers; do
  source_host=$((source_host + 1))
  flood flood 127.0.0.1 "$port" "$kind" 3 --ca "$WORK/tls/ca.pem" --source "127.0.0.$source_host" \
    >>"$WORK/flood.log" 2>&1
  serving || fail "the controller stopped serving during the $kind flood"
done
if [ "$(id -u)" -eq 0 ]; then
  chmod 0711 "$WORK/state"
  setpriv --reuid=65534 --regid=65534 --clear-groups \
    /usr/bin/python3 "$ROOT/tests/integration/h2_flood.py" flood "unix:$WORK/state/cohort.sock" 0 reset 3 \
    >>"$WORK/flood.log" 2>&1
  out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$BIN/cli/cohort" queue 2>&1) &&
    fail "a user who just passed a bound was answered at once: $out"
  grep -q "passed a bound of the controller's" <<<"$out" || fail "the penalized user was told: $out"
fi
grep -q "rpc_client_refused" "$WORK/controller.log" || fail "no rpc_client_refused in the log"
after=$(rss_kib)
grown=$(((after - before) / 1024))
# Under the sanitizers freed memory waits in ASan's quarantine (256 MiB)
# rather than going back: the asan preset allows more.
[ "$grown" -lt "${HARDENING_GROWTH_MIB:-256}" ] || fail "HTTP/2 floods grew the controller by $grown MiB ($(tr '\n' ';' <"$WORK/flood.log"))"
over_tcp cohort queue >/dev/null || fail "TCP calls fail after the floods"
[ "$(metric cohort_rpc_connections_refused_total)" -ge 4 ] ||
  fail "cohort_rpc_connections_refused_total is $(metric cohort_rpc_connections_refused_total)"
pass "HTTP/2 floods (CONTINUATION, rapid reset, open streams, huge headers) grew it by $grown MiB"

# 9. Handshakes that never finish, 300 from one address, do not keep
# another client from the HTTP port.
coproc HOLD { flood hold 127.0.0.1 "$http_port" 300 --source 127.0.0.2 --tls-hello; }
read -r opened <&"${HOLD[0]}"
metrics=$(web --max-time 10 -o /dev/null -w '%{http_code}' "$(web_base)/metrics")
[ "$metrics" = 200 ] || fail "/metrics answered $metrics while 127.0.0.2 held $opened"
exec {HOLD[1]}>&-
wait "$HOLD_PID" 2>/dev/null
[ "$(metric cohort_http_connections_refused_total)" -gt 0 ] ||
  fail "cohort_http_connections_refused_total is $(metric cohort_http_connections_refused_total)"
pass "300 stalled TLS handshakes from one address ($opened) leave /metrics to others"

# 3. Descriptors run out, then come back: the TCP port accepts again.
# (From eight addresses: one address holds at most 64 connections.)
limit=$(prlimit --pid "$CONTROLLER_PID" --nofile --output SOFT --noheadings)
prlimit --pid "$CONTROLLER_PID" --nofile=256: || fail "prlimit could not lower the limit"
coproc HOLD { flood hold 127.0.0.1 "$port" 400 --spread 8; }
read -r opened <&"${HOLD[0]}"
wait_until 20 grep -q connections_shed "$WORK/controller.log" ||
  fail "no connection was shed with $opened held"
exec {HOLD[1]}>&-
wait "$HOLD_PID" 2>/dev/null
prlimit --pid "$CONTROLLER_PID" --nofile="$limit": || true
wait_until 30 over_tcp cohort queue || fail "the TCP port does not accept after descriptors came back"
serving || fail "the local socket does not answer after descriptors came back"
[ "$(metric cohort_rpc_connections_shed_total)" -gt 0 ] ||
  fail "cohort_rpc_connections_shed_total is $(metric cohort_rpc_connections_shed_total)"
pass "out of descriptors ($opened held against 256) it sheds, then accepts again"

# 8. A full disk: changes are refused with a retryable answer, reads are
# served, and writes resume when space returns.
if [ -n "$TMPFS" ]; then
  dd if=/dev/zero of="$TMPFS/filler" bs=64k >/dev/null 2>&1
  refused=""
  for _ in $(seq 20); do
    out=$(timeout 10 "$BIN/cli/cohort" submit -N 1 --hold -- true 2>&1)
    if grep -q "cannot write its state" <<<"$out"; then refused=$out; break; fi
  done
  [ -n "$refused" ] || fail "a submission to a full disk was not refused: $out"
  grep -q "try again later" <<<"$refused" || fail "the refusal does not say to retry: $refused"
  serving || fail "the controller stopped serving on a full disk"
  [ "$(metric cohort_state_writes_refused)" = 1 ] || fail "cohort_state_writes_refused is not 1"
  cohort queue >/dev/null || fail "cohort queue fails on a full disk"
  status=$(web -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $token" \
    -H 'Content-Type: application/json' \
    --data-binary '{"spec": {"argv": ["true"], "nodes": 1, "hold": true}}' "$(web_base)/api/v1/jobs")
  [ "$status" = 429 ] || fail "REST submit on a full disk answered $status, not 429"
  rm -f "$TMPFS/filler"
  wait_until 30 cohort submit -N 1 --hold -- true || fail "writes did not resume once space returned"
  grep -q state_write_resumed "$WORK/controller.log" || fail "no state_write_resumed in the log"
  pass "a full disk refuses changes (429 over REST), serves reads, and resumes"
else
  echo "skip: the full-disk part needs root and a tmpfs mount"
fi

# 4. An agent paused past NodeTimeout: its job is requeued, and when it
# resumes its nodes come back and the job runs again.
attempt_of() { cohort show job "$1" --json | sed -n 's/.*"attempt": *\([0-9]*\).*/\1/p' | head -1; }
id=$(submit -N 16 --requeue -- sleep 300)
wait_until 30 state_is "$id" RUNNING || fail "job $id did not start"
first_attempt=$(attempt_of "$id")
kill -STOP "$AGENT_PID"
some_down() { node_states | grep -q DOWN; }
wait_until 60 some_down || fail "the nodes of a stopped agent did not go down"
kill -CONT "$AGENT_PID"
wait_until 60 all_nodes_up || fail "the nodes did not come back after the agent resumed: $(node_states | sort | uniq -c)"
restarted() { [ "$(attempt_of "$id")" -gt "$first_attempt" ] && state_is "$id" RUNNING; }
wait_until 60 restarted || fail "requeued job $id did not run again: $(cohort show job "$id")"
grep -q agent_reregister "$WORK/controller.log" || fail "no agent_reregister in the log"
cohort cancel "$id"
pass "a paused agent's nodes come back when it resumes, and its requeued job runs again"

finish_test
