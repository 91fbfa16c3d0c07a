#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The site's submit policy (JobSubmitPlugins=lua, job_submit.lua beside
# cohort.conf), with Slurm's commands on the demo cluster: a job without a
# time limit is refused with the script's message, one that names no
# partition is sent to the one the script picks, a bug in the script
# refuses the job naming its line while the controller serves the next;
# slurm_job_modify refuses and changes an scontrol update;
# `cohort config check` checks the script, and `--policy FILE --replay N`
# runs a new one over the jobs in the history before it goes live.
source "$(dirname "$0")/lib.sh"
SLURM_BIN=$BIN/cli/slurm
export PATH="$SLURM_BIN:$BIN/cli:$PATH"

cat >"$WORK/job_submit.lua" <<'LUA'
-- Every job says how long it runs; one that names no partition goes to high.
function slurm_job_submit(job_desc, part_list, submit_uid)
  if job_desc.comment == "bug" then
    local limits = nil
    return limits.max_time
  end
  if job_desc.time_limit == slurm.NO_VAL then
    slurm.log_user("every job needs a time limit: add --time=HH:MM:SS")
    return slurm.ERROR
  end
  if job_desc.partition == nil then
    job_desc.partition = "high"
    slurm.log_info("job %s of uid %d sent to high", job_desc.name or "?", submit_uid)
  end
  return slurm.SUCCESS
end

-- An update may not move a job to gpu, and lengthens a job by 30 minutes
-- at most.
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  if job_desc.partition == "gpu" then
    slurm.log_user("jobs of %s stay out of gpu", job_rec.user_name)
    return slurm.ERROR
  end
  if job_desc.time_limit ~= slurm.NO_VAL and job_desc.time_limit > job_rec.time_limit + 30 then
    job_desc.time_limit = job_rec.time_limit + 30
  end
  return slurm.SUCCESS
end
LUA
EXTRA_CONF="JobSubmitPlugins=lua" start_cluster

# 1. Refused without a time limit, with the script's words.
if out=$(sbatch --wrap true 2>&1); then
  fail "a job without --time was queued: $out"
else
  grep -q "every job needs a time limit: add --time=HH:MM:SS" <<<"$out" ||
    fail "the refusal does not carry the script's message: $out"
fi

# 2. A job naming no partition goes to the one the script picks.
id=$(sbatch --parsable -t 5 -J picked --wrap true) || fail "a job with --time was refused"
scontrol show job "$id" | grep -qw "Partition=high" || fail "job $id is not in high: $(scontrol show job "$id")"
named=$(sbatch --parsable -t 5 -p gpu --wrap true) || fail "a job naming gpu was refused"
grep -q "job_submit_lua job picked of uid" "$WORK/controller.log" ||
  fail "the script's slurm.log_info did not reach the controller's log"
pass "job_submit.lua: refused without --time (its message), a job naming no partition sent to high"

# 3. A bug in the script refuses that job, naming the line; the next is served.
if out=$(sbatch -t 5 --comment bug --wrap true 2>&1); then
  fail "the script's error let the job in: $out"
else
  grep -q "job_submit.lua:5: attempt to index a nil value" <<<"$out" ||
    fail "the script's error does not name its line: $out"
fi
after=$(sbatch --parsable -t 5 --wrap true) || fail "the controller stopped serving after the script failed"
pass "a bug in job_submit.lua refuses the job with its line; the next job is taken"

# 4. slurm_job_modify on scontrol update of a pending job: refused, and
# changed.
held=$(sbatch --parsable -H -t 5 --wrap true) || fail "a held job was refused"
scontrol update JobId="$held" Partition=gpu 2>"$WORK/update.err" && fail "the update to gpu was taken"
grep -q "jobs of root stay out of gpu" "$WORK/update.err" || fail "update refusal: $(cat "$WORK/update.err")"
scontrol update JobId="$held" TimeLimit=2:00:00 2>"$WORK/update.err" || fail "the longer limit was refused: $(cat "$WORK/update.err")"
[ "$(squeue -h -j "$held" -o %l)" = 35:00 ] || fail "slurm_job_modify's limit: $(squeue -h -j "$held" -o %l)"
scancel "$held"
pass "slurm_job_modify on scontrol update: a move refused with its message, a limit cut to the site's"

for job in "$id" "$named" "$after" "$held"; do
  wait_until 30 finished "$job" || fail "job $job did not finish"
done

# 5. cohort config check: the live script, a broken one, and a new one
# replayed over the jobs the history holds.
check=$(cohort config check -c "$WORK/cohort.conf") || fail "config check failed: $check"
grep -q "^policy .*job_submit.lua: ok" <<<"$check" || fail "config check does not check the script: $check"
printf 'function slurm_job_submit(j, p, u)\n  return slurm.SUCCESS\n' >"$WORK/broken.lua"
if out=$(cohort config check --policy "$WORK/broken.lua" 2>&1); then
  fail "config check passed a broken script: $out"
else
  grep -q "broken.lua:3:" <<<"$out" || fail "config check does not say where the script breaks: $out"
fi
cat >"$WORK/stricter.lua" <<'LUA'
-- Jobs in high may run 2 minutes at most; the rest get a comment.
function slurm_job_submit(job_desc, part_list, submit_uid)
  if job_desc.partition == "high" and job_desc.time_limit > 2 then
    slurm.log_user("high takes jobs of 2 minutes at most")
    return slurm.ERROR
  end
  job_desc.comment = "checked"
  return slurm.SUCCESS
end
LUA
replay=$(cohort config check --policy "$WORK/stricter.lua" --replay 10) ||
  fail "config check --replay failed: $replay"
grep -q "^job $id (root): refused: high takes jobs of 2 minutes at most$" <<<"$replay" &&
  grep -q "^job $named (root): changed: comment: (none) -> checked$" <<<"$replay" &&
  grep -q "^job $held (root): refused: high takes jobs of 2 minutes at most$" <<<"$replay" &&
  grep -q "^replayed   4 jobs: 0 unchanged, 1 changed, 3 refused, 0 where the policy failed$" <<<"$replay" ||
  fail "config check --replay: $replay"
pass "config check: the live script, a broken one named by line, and a new one replayed over history"

# 6. Reloaded with the configuration: a script that no longer loads is
# refused, and the one in force stays.
cp "$WORK/job_submit.lua" "$WORK/job_submit.lua.good"
cp "$WORK/broken.lua" "$WORK/job_submit.lua"
if out=$(cohort reconfigure 2>&1); then
  fail "reconfigure took a broken submit policy: $out"
else
  grep -q "the submit policy: .*job_submit.lua:3:" <<<"$out" || fail "reconfigure: $out"
fi
sbatch --wrap true >/dev/null 2>&1 && fail "the policy in force was dropped by a refused reconfigure"
sbatch -t 1 --wrap true >/dev/null || fail "the controller stopped serving after a refused reconfigure"
cp "$WORK/job_submit.lua.good" "$WORK/job_submit.lua"
pass "reconfigure with a script that does not load is refused; the policy in force stays"
finish_test
