#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The REST API on the controller's HTTPS port, driven with curl as
# slurmrestd's clients drive it: anonymous reads, tokens from `cohort
# token` (a user's own, and one root issues for another user), a MUNGE
# credential in a header, submit, show, why, cancel and history, and the
# refusals: a forged, an expired and a missing token, another user's job,
# a malformed query or body.
source "$(dirname "$0")/lib.sh"

USER_UID=61031
created=""
if [ "$(id -u)" -eq 0 ] && command -v useradd >/dev/null && ! getent passwd $USER_UID >/dev/null; then
  useradd -u $USER_UID -U -M -d /nonexistent -s /bin/sh cohortrest 2>/dev/null && created=cohortrest
fi
OTHER=$(getent passwd $USER_UID | cut -d: -f1)
trap '[ -n "$created" ] && userdel "$created" 2>/dev/null; cleanup' EXIT

IT_HTTP=on start_cluster
api="$(web_base)/api/v1"
# call METHOD PATH [TOKEN] [BODY]: prints the body, then the HTTP status on
# a line of its own.
call() {
  local auth=()
  [ -n "${3:-}" ] && auth=(-H "Authorization: Bearer $3")
  local data=()
  [ -n "${4:-}" ] && data=(-H 'Content-Type: application/json' --data-binary "$4")
  web -X "$1" "${auth[@]}" "${data[@]}" -w '\n%{http_code}\n' "$api/$2"
}
status_of() { tail -1 <<<"$1"; }
json() { sed '$d' <<<"$1" | python3 -c "import json,sys; d=json.load(sys.stdin); print($2)"; }

# Anonymous reads: nodes, partitions, the tree.
out=$(call GET nodes)
[ "$(status_of "$out")" = 200 ] && [ "$(json "$out" 'len(d["nodes"])')" = 16 ] ||
  fail "GET nodes: $out"
out=$(call GET topology)
[ "$(json "$out" 'sum(1 for s in d["switches"] if s["level"] == 0)')" = 4 ] || fail "GET topology: $out"
out=$(call GET partitions)
[ "$(json "$out" 'd["partitions"][0]["total_gpus"]')" = 128 ] || fail "GET partitions: $out"
pass "anonymous callers read nodes (16), partitions and the switch tree"

# Anonymous callers may not submit.
spec='{"spec": {"name": "rest", "argv": ["sleep", "300"], "nodes": 2, "gpus_per_node": 8, "work_dir": "'"$WORK"'"}}'
out=$(call POST jobs "" "$spec")
[ "$(status_of "$out")" = 403 ] && grep -q 'cohort token' <<<"$out" ||
  fail "an anonymous submit was not refused with a hint: $out"
pass "an anonymous submit is refused (403) and says how to get a token"

# Root's own token submits; the job is root's and runs on one leaf switch.
token=$(cohort token | sed -n 's/^COHORT_TOKEN=//p')
[ -n "$token" ] || fail "cohort token printed no token"
out=$(call POST jobs "$token" "$spec")
[ "$(status_of "$out")" = 200 ] || fail "POST jobs with a token: $out"
job=$(json "$out" 'd["job_id"]')
wait_until 30 state_is "$job" RUNNING || fail "job $job did not start"
out=$(call GET "jobs/$job" "$token")
[ "$(json "$out" 'd["job"]["state"]')" = JOB_RUNNING ] && [ "$(json "$out" 'd["job"]["uid"]')" = 0 ] ||
  fail "GET jobs/$job: $out"
[ "$(json "$out" 'len(d["job"]["leaves"].split(","))')" = 1 ] || fail "job $job spans $(json "$out" 'd["job"]["leaves"]')"
pass "a token of root submits job $job (POST jobs); it runs as root's on one leaf switch"

# Filters from the query; a parameter that is no field is refused by name.
out=$(call GET "jobs?all_users=true&states=JOB_RUNNING" "$token")
[ "$(json "$out" '[j["id"] for j in d["jobs"]]')" = "['$job']" ] || fail "GET jobs?states=JOB_RUNNING: $out"
out=$(call GET "jobs?colour=blue" "$token")
[ "$(status_of "$out")" = 400 ] && grep -q "'colour' is not a field of ListJobsRequest" <<<"$out" ||
  fail "an unknown query parameter: $out"
out=$(call POST jobs "$token" '{"spec": {"nodes": "many"}}')
[ "$(status_of "$out")" = 400 ] && grep -q 'not a SubmitJobRequest' <<<"$out" || fail "a bad body: $out"
pass "queries filter by field (states=JOB_RUNNING); an unknown field or bad body is a 400 naming it"

# A job that cannot start now: why it waits.
wide=$(submit -N 16 --gpus-per-node 8 -- true)
considered() { [ "$(job_reason "$wide")" = Resources ]; }
wait_until 30 considered || fail "job $wide waits for $(job_reason "$wide")"
out=$(call GET "jobs/$wide/why")
[ "$(json "$out" 'd["pending_reason"]')" = Resources ] && [ "$(json "$out" 'd["wait"]["nodes"]')" = 16 ] ||
  fail "GET jobs/$wide/why: $out"
pass "GET jobs/ID/why says why job $wide waits (Resources, 16 nodes)"

# A MUNGE credential in a header is the caller too.
cred=$(munge -S "$MUNGE_SOCKET" -s cohort-client)
out=$(web -w '\n%{http_code}\n' -H "X-Cohort-Munge: $cred" "$api/jobs?all_users=true")
[ "$(status_of "$out")" = 200 ] && [ "$(json "$out" 'len(d["jobs"])')" = 2 ] ||
  fail "GET jobs with X-Cohort-Munge: $out"
pass "an X-Cohort-Munge credential identifies the caller"

# Forged, expired and malformed tokens are refused, not taken as anonymous.
# One character in the middle of the signature changed.
at=$((${#token} - 20))
forged="${token:0:at}$([ "${token:at:1}" = A ] && echo B || echo A)${token:at+1}"
out=$(call GET nodes "$forged")
[ "$(status_of "$out")" = 401 ] && grep -q 'signature' <<<"$out" || fail "a forged token: $out"
short=$(cohort token --lifespan 1 | sed -n 's/^COHORT_TOKEN=//p')
sleep 2
out=$(call GET nodes "$short")
[ "$(status_of "$out")" = 401 ] && grep -q 'expired' <<<"$out" || fail "an expired token: $out"
out=$(call GET nodes "not-a-token")
[ "$(status_of "$out")" = 401 ] || fail "a malformed token: $out"
pass "forged (signature), expired and malformed tokens are refused (401)"

if [ -n "$OTHER" ]; then
  # Root issues a token for another user; it may not cancel root's job.
  other_token=$(cohort token --user "$OTHER" | sed -n 's/^COHORT_TOKEN=//p')
  out=$(call DELETE "jobs/$job" "$other_token")
  [ "$(status_of "$out")" = 403 ] || fail "$OTHER cancelled root's job: $out"
  state_is "$job" RUNNING || fail "job $job is $(job_state "$job") after $OTHER's cancel"
  out=$(setpriv --reuid=$USER_UID --regid=$USER_UID --clear-groups env COHORT_CONTROLLER="127.0.0.1:$(cat "$WORK/port")" \
    "$BIN/cli/cohort" token --user root 2>&1)
  grep -q 'may not issue a token for root' <<<"$out" || fail "$OTHER got a token for root: $out"
  pass "a token of $OTHER may not cancel root's job (403); $OTHER may not get root's token"
else
  echo "skipped: another user's token needs root and useradd"
fi

# Root cancels through the API; the job is in the history.
out=$(call DELETE "jobs/$job" "$token")
[ "$(status_of "$out")" = 200 ] || fail "DELETE jobs/$job: $out"
wait_until 30 state_is "$job" CANCELLED || fail "job $job is $(job_state "$job") after DELETE"
cohort cancel "$wide" >/dev/null 2>&1
wait_until 30 finished "$wide" || fail "job $wide did not end"
out=$(call GET "history?all_users=true" "$token")
[ "$(json "$out" 'sorted(j["id"] for j in d["jobs"])')" = "$(python3 -c "print(sorted(['$job', '$wide']))")" ] ||
  fail "GET history: $out"
out=$(call GET shares "$token")
[ "$(status_of "$out")" = 200 ] || fail "GET shares: $out"
out=$(call GET accounts "$token")
[ "$(json "$out" '[a["account"] for a in d["associations"] if not a["user"]]')" = "['pretrain', 'research']" ] ||
  fail "GET accounts: $out"
"$BIN/cli/slurm/scontrol" create reservation ReservationName=later StartTime=now+1day Duration=60 \
  Nodes=node16 Users=root >/dev/null || fail "scontrol create reservation failed"
out=$(call GET reservations "$token")
[ "$(json "$out" '[(r["name"], r["nodes"], r["active"]) for r in d["reservations"]]')" = "[('later', 'node16', False)]" ] ||
  fail "GET reservations: $out"
out=$(call GET "transactions?limit=5" "$token")
[ "$(status_of "$out")" = 200 ] || fail "GET transactions: $out"
out=$(call GET "nothing")
[ "$(status_of "$out")" = 404 ] && grep -q 'GET jobs, POST jobs' <<<"$out" || fail "an unknown route: $out"
pass "DELETE jobs/ID cancels; history, shares, accounts, reservations and transactions answer; an unknown route lists the routes"
finish_test
