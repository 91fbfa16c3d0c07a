#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The gang-deadlock test: 4 users submit 100 three-node jobs at once on 8
# nodes, far more than fit (DEADLOCK_JOBS_PER_CLIENT, default 25 each; the
# sanitizer preset runs fewer). Every job completes, none ever runs on fewer
# nodes than asked, and no two jobs ever hold the same GPU at the same time.
source "$(dirname "$0")/lib.sh"
# As root, four real users submit (identified by the controller's socket
# from their peer credentials) and the agent runs unprivileged; otherwise
# four clients of the one user this test runs as.
users=("" "" "" "")
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
  export AGENT_UID=61000
  users=(61001 61002 61003 61004)
fi
as_user() {
  if [ -n "$1" ]; then
    setpriv --reuid="$1" --regid="$1" --clear-groups "${@:2}"
  else
    "${@:2}"
  fi
}
start_cluster "$ROOT/tests/data/clusters/eight-nodes.conf" "$ROOT/tests/data/clusters/eight-nodes-topology.conf"

# Each rank logs: job node gpus start end (monotonic nanoseconds). It runs
# 0.2 s so that jobs given the same GPU would overlap; the check reads the
# logs only once every job has finished.
per_client=${DEADLOCK_JOBS_PER_CLIENT:-25}
total=$((4 * per_client))
clients=()
rank_script='s=$(date +%s%N); sleep 0.2; echo "$SLURM_JOB_ID $COHORT_NODENAME $CUDA_VISIBLE_DEVICES $s $(date +%s%N)" >> '"$WORK"'/logs/log-$SLURM_JOB_ID-$RANK'
mkdir -p "$WORK/logs" && chmod 1777 "$WORK/logs"
for client in 1 2 3 4; do
  (
    for _ in $(seq "$per_client"); do
      as_user "${users[$((client - 1))]}" "$BIN/cli/cohort" submit -N 3 --gpus-per-node 4 \
        -D "$WORK/logs" -o /dev/null -- sh -c "$rank_script" >>"$WORK/ids-$client" 2>&1 ||
        echo "submit failed" >>"$WORK/ids-$client"
    done
  ) &
  clients+=($!)
done
wait "${clients[@]}"
ids=$(cat "$WORK"/ids-* | sed -n 's/^Submitted job \([0-9]*\)$/\1/p')
[ "$(wc -w <<<"$ids")" -eq "$total" ] || fail "$(wc -w <<<"$ids") of $total submissions got an id: $(grep -vh Submitted "$WORK"/ids-* | head -3)"

if [ -n "${users[0]}" ]; then
  # Users see each other's jobs but cancel only their own.
  # Each client's jobs belong to the user it ran as (peer credentials).
  for client in 1 2 3 4; do
    first=$(sed -n 's/^Submitted job \([0-9]*\)$/\1/p' "$WORK/ids-$client" | head -1)
    show=$(cohort show job "$first" --json)
    grep -q "\"uid\": *${users[$((client - 1))]}," <<<"$show" ||
      fail "job $first of client $client is not user ${users[$((client - 1))]}'s: $show"
  done
  victim=$(as_user 61002 "$BIN/cli/cohort" submit -N 1 -D "$WORK/logs" -o /dev/null -- sleep 60 |
    sed -n 's/^Submitted job \([0-9]*\)$/\1/p')
  out=$(as_user 61001 "$BIN/cli/cohort" cancel "$victim" 2>&1) &&
    fail "user 61001 cancelled job $victim of user 61002"
  grep -q "only your own" <<<"$out" || fail "cancel of another user's job said: $out"
  as_user 61002 "$BIN/cli/cohort" cancel "$victim" || fail "user 61002 could not cancel job $victim"
  wait_until 60 finished "$victim" || fail "job $victim did not end"
  [ "$(job_state "$victim")" = CANCELLED ] || fail "job $victim is $(job_state "$victim")"
  pass "users cancel only their own jobs"
fi

all_finished() {
  local json
  json=$(cohort queue --json) || return 1
  ! grep -q '"id"' <<<"$json"
}
wait_until 300 all_finished || fail "jobs still queued: $(cohort queue | head -5)"
for id in $ids; do
  state=$(job_state "$id")
  [ "$state" = COMPLETED ] || fail "job $id is $state"
done

python3 - "$WORK" "$total" <<'PY' || fail "gang or GPU check failed"
import glob, sys, collections
work = sys.argv[1]
total = int(sys.argv[2])
jobs = collections.defaultdict(list)
for path in glob.glob(f"{work}/logs/log-*"):
    for line in open(path):
        job, node, gpus, start, end = line.split()
        jobs[job].append((node, set(gpus.split(",")), int(start), int(end)))
bad = 0
for job, ranks in jobs.items():
    nodes = {r[0] for r in ranks}
    if len(ranks) != 3 or len(nodes) != 3:
        print(f"job {job} ran {len(ranks)} ranks on {sorted(nodes)}"); bad += 1
spans = [(node, gpu, start, end, job) for job, ranks in jobs.items()
         for node, gpus, start, end in ranks for gpu in gpus]
by_gpu = collections.defaultdict(list)
for node, gpu, start, end, job in spans:
    by_gpu[(node, gpu)].append((start, end, job))
for key, uses in by_gpu.items():
    uses.sort()
    for (s1, e1, j1), (s2, e2, j2) in zip(uses, uses[1:]):
        if s2 < e1:
            print(f"jobs {j1} and {j2} shared gpu {key}"); bad += 1
print(f"{len(jobs)} jobs checked")
sys.exit(1 if bad or len(jobs) != total else 0)
PY
pass "100 oversubscribed gang jobs completed whole without sharing a GPU"
finish_test
