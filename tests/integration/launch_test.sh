#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# How ranks are launched on a node: --open-mode append and truncate, -D
# created when missing (and refused, with the reason, where the owner cannot
# create it), output that lands even when a rank is killed by a signal, and,
# with the agent running as root, ranks that run as the job's owner (uid,
# gid, HOME) and create their files as that owner. Checks the memory limit
# of the job's cgroup where the agent has cgroups, and says it skipped that
# otherwise.
source "$(dirname "$0")/lib.sh"

# As root the agent runs as root (AGENT_UID unset) and a test user submits.
TEST_UID=61011
TEST_USER=cohortit$TEST_UID
UNKNOWN_UID=61234
created_user=""
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null && command -v useradd >/dev/null; then
  unset AGENT_UID
  if ! getent passwd "$TEST_UID" >/dev/null; then
    useradd -u "$TEST_UID" -U -M -d "$WORK/home-$TEST_UID" -s /bin/sh "$TEST_USER" &&
      created_user=$TEST_USER
  fi
  if getent passwd "$UNKNOWN_UID" >/dev/null; then UNKNOWN_UID=""; fi
fi
remove_user() { [ -n "$created_user" ] && userdel "$created_user" 2>/dev/null; }
trap 'remove_user; cleanup' EXIT
as_test_user() { setpriv --reuid="$TEST_UID" --regid="$(id -g "$TEST_UID")" --init-groups "$@"; }

start_cluster "$ROOT/tests/data/clusters/eight-nodes.conf" "$ROOT/tests/data/clusters/eight-nodes-topology.conf"

# run_job ARGS...: submits, waits for the end, prints the id.
run_job() {
  local id
  id=$(submit "$@")
  [ -n "$id" ] || { fail "submit $* printed no id"; return 1; }
  wait_until 60 finished "$id" || fail "job $id did not finish"
  echo "$id"
}

# --open-mode: append keeps what was there, truncate (the default) empties it.
echo earlier >"$WORK/append.out"
echo earlier >"$WORK/truncate.out"
echo earlier >"$WORK/default.out"
id=$(run_job --open-mode=append -o "$WORK/append.out" -- echo later)
[ "$(job_state "$id")" = COMPLETED ] || fail "append job $id is $(job_state "$id")"
[ "$(cat "$WORK/append.out")" = "$(printf 'earlier\nlater')" ] ||
  fail "append lost the earlier output: $(cat "$WORK/append.out")"
run_job --open-mode=truncate -o "$WORK/truncate.out" -- echo later >/dev/null
[ "$(cat "$WORK/truncate.out")" = later ] || fail "truncate kept: $(cat "$WORK/truncate.out")"
run_job -o "$WORK/default.out" -- echo later >/dev/null
[ "$(cat "$WORK/default.out")" = later ] || fail "the default did not truncate: $(cat "$WORK/default.out")"
# A shared file of a 2-node x 2-rank job is truncated once, not under ranks
# already writing: all four lines stay. The job's rank 0 truncates it when
# its output is opened, before it runs; the ranks write once rank 0 runs (a
# file it makes says so; the 0.1 s sleep is their polling interval), not
# after a fixed time that a slow launch of node 0 could outlast.
echo earlier >"$WORK/shared.out"
run_job -N 2 --ntasks-per-node 2 -o "$WORK/shared.out" -- sh -c \
  '[ "$RANK" = 0 ] && touch "$0"; while [ ! -e "$0" ]; do sleep 0.1; done; echo "rank $RANK"' \
  "$WORK/rank0-runs" >/dev/null
[ "$(sort "$WORK/shared.out" | tr '\n' ' ')" = "rank 0 rank 1 rank 2 rank 3 " ] ||
  fail "shared truncated file: $(cat "$WORK/shared.out")"
out=$(cohort submit --open-mode=sometimes -- true 2>&1) && fail "--open-mode=sometimes accepted"
grep -q -- "--open-mode" <<<"$out" || fail "--open-mode=sometimes refused without naming it: $out"
pass "--open-mode append keeps, truncate empties once per job"

# -D: a missing folder is created, with its parents.
id=$(run_job -D "$WORK/made/here" -o "$WORK/pwd.out" -- pwd)
[ "$(job_state "$id")" = COMPLETED ] || fail "-D job $id is $(job_state "$id"): $(cohort show job "$id")"
[ -d "$WORK/made/here" ] || fail "-D did not create $WORK/made/here"
[ "$(cat "$WORK/pwd.out")" = "$WORK/made/here" ] || fail "ranks ran in $(cat "$WORK/pwd.out")"
pass "-D creates a missing working directory"

# Output lands even when the rank dies by a signal right after writing it.
id=$(run_job -o "$WORK/killed.out" -- sh -c 'echo before-the-signal; kill -KILL $$')
[ "$(job_state "$id")" = FAILED ] || fail "killed job $id is $(job_state "$id")"
[ "$(cat "$WORK/killed.out")" = before-the-signal ] || fail "killed rank's output: $(cat "$WORK/killed.out")"
pass "a rank killed by a signal keeps its output"

if [ -n "$(getent passwd "$TEST_UID" 2>/dev/null)" ] && [ "$(id -u)" -eq 0 ]; then
  # The owner's identity: uid, primary gid and HOME of the passwd entry.
  mkdir -p "$WORK/owner" && chmod 1777 "$WORK/owner"
  id=$(as_test_user "$BIN/cli/cohort" submit -o "$WORK/owner/%j.out" -- \
    sh -c 'id -u; id -g; echo "$HOME"; echo "$USER"' | sed -n 's/^Submitted job \([0-9]*\)$/\1/p')
  [ -n "$id" ] || fail "the test user's submission printed no id"
  wait_until 60 finished "$id" || fail "job $id did not finish"
  [ "$(job_state "$id")" = COMPLETED ] || fail "owner job $id is $(job_state "$id"): $(cohort show job "$id")"
  expected=$(printf '%s\n%s\n%s\n%s' "$TEST_UID" "$(id -g "$TEST_UID")" \
    "$(getent passwd "$TEST_UID" | cut -d: -f6)" "$(getent passwd "$TEST_UID" | cut -d: -f1)")
  [ "$(cat "$WORK/owner/$id.out")" = "$expected" ] ||
    fail "the rank ran as $(tr '\n' ' ' <"$WORK/owner/$id.out"), not as $(tr '\n' ' ' <<<"$expected")"
  [ "$(stat -c %u:%g "$WORK/owner/$id.out")" = "$TEST_UID:$(id -g "$TEST_UID")" ] ||
    fail "the output file is owned by $(stat -c %u:%g "$WORK/owner/$id.out")"
  pass "a root agent runs the ranks as the job's owner, who owns the output"

  # The owner cannot create a working directory where root could.
  mkdir -p "$WORK/rootonly" && chmod 755 "$WORK/rootonly"
  id=$(as_test_user "$BIN/cli/cohort" submit -D "$WORK/rootonly/sub" -o "$WORK/owner/%j.out" -- true |
    sed -n 's/^Submitted job \([0-9]*\)$/\1/p')
  wait_until 60 finished "$id" || fail "job $id did not finish"
  [ "$(job_state "$id")" = FAILED ] || fail "job $id in an unwritable -D is $(job_state "$id")"
  grep -q "cannot create working directory $WORK/rootonly/sub: Permission denied" <<<"$(cohort show job "$id")" ||
    fail "unwritable -D: $(cohort show job "$id" | grep -i reason)"
  [ -e "$WORK/rootonly/sub" ] && fail "root created $WORK/rootonly/sub for the user"
  # Nor may root truncate a file of someone else's for them.
  echo precious >"$WORK/owner/root-owned.out" && chmod 644 "$WORK/owner/root-owned.out"
  id=$(as_test_user "$BIN/cli/cohort" submit -o "$WORK/owner/root-owned.out" -- echo overwritten |
    sed -n 's/^Submitted job \([0-9]*\)$/\1/p')
  wait_until 60 finished "$id" || fail "job $id did not finish"
  [ "$(job_state "$id")" = FAILED ] || fail "job $id writing a root file is $(job_state "$id")"
  [ "$(cat "$WORK/owner/root-owned.out")" = precious ] || fail "a root-owned file was truncated for a user"
  pass "the owner's files and folders are made with the owner's rights only"

  if [ -n "$UNKNOWN_UID" ]; then
    id=$(setpriv --reuid="$UNKNOWN_UID" --regid="$UNKNOWN_UID" --clear-groups "$BIN/cli/cohort" \
      submit -o /dev/null -- true | sed -n 's/^Submitted job \([0-9]*\)$/\1/p')
    wait_until 60 finished "$id" || fail "job $id did not finish"
    [ "$(job_state "$id")" = FAILED ] || fail "job $id of an unknown user is $(job_state "$id")"
    grep -q "user $UNKNOWN_UID does not exist on [a-z0-9]*; create it or use the same users on every node" \
      <<<"$(cohort show job "$id")" || fail "unknown user: $(cohort show job "$id" | grep -i reason)"
    pass "a job of a user the node does not know fails with that reason"
  fi
else
  # Not root: -D where this user cannot create it.
  mkdir -p "$WORK/readonly" && chmod 555 "$WORK/readonly"
  id=$(run_job -D "$WORK/readonly/sub" -o /dev/null -- true)
  [ "$(job_state "$id")" = FAILED ] || fail "job $id in an unwritable -D is $(job_state "$id")"
  grep -q "cannot create working directory $WORK/readonly/sub: Permission denied" <<<"$(cohort show job "$id")" ||
    fail "unwritable -D: $(cohort show job "$id" | grep -i reason)"
  chmod 755 "$WORK/readonly"
  echo "skipped: running as the job's owner needs the test to run as root (with setpriv and useradd)"
fi

# The job's memory per node is its cgroup's memory.max (cgroup v2) or
# memory.limit_in_bytes (v1).
if grep -q "cgroups_enabled version=2" "$WORK/agent.log"; then
  id=$(run_job --mem=64 -o "$WORK/memory.out" -- \
    sh -c 'cat "/sys/fs/cgroup$(sed -n "s/^0:://p" /proc/self/cgroup)/memory.max"')
  [ "$(cat "$WORK/memory.out")" = 67108864 ] || fail "memory.max of a --mem=64 job: $(cat "$WORK/memory.out")"
  pass "--mem sets memory.max of the job's cgroup"
elif grep -q "cgroups_enabled version=1" "$WORK/agent.log"; then
  id=$(run_job --mem=64 -o "$WORK/memory.out" -- sh -c \
    'cat "/sys/fs/cgroup/memory$(sed -n "s/^[0-9]*:memory://p" /proc/self/cgroup)/memory.limit_in_bytes"')
  [ "$(cat "$WORK/memory.out")" = 67108864 ] ||
    fail "memory.limit_in_bytes of a --mem=64 job: $(cat "$WORK/memory.out")"
  pass "--mem sets memory.limit_in_bytes of the job's cgroup v1"
else
  echo "skipped: memory.max check: $(grep -o 'cgroups unavailable.*' "$WORK/agent.log" | head -1)"
fi
finish_test
