#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# README.md as a new user follows it: every command of its fenced code
# blocks, read from README.md when the test runs (an edit of README.md is
# tested as it is made), in README order, against the demo cluster
# (etc/demo: 16 emulated nodes of 8 GPUs under 4 leaf switches).
#
# ```console blocks: each `$ CMD` line runs; the lines after it, up to the
# next `$ ` line or the block's end, are what it prints (stdout and stderr
# together), compared line by line. A line `...` stands for any number of
# lines, none included; every other line must match, in order, and nothing
# may come before the first or after the last unless a `...` says so.
# Both sides are normalised first, and nothing else is forgiven:
#   - runs of blanks are one blank, trailing blanks go (columns are padded
#     to their contents' width);
#   - an elapsed time under a minute, a word 0:SS (squeue's TIME), is 0:<ss>;
#   - the port of `master ADDR:PORT` is <port>.
# Job ids are literal: the quickstart's block is the first to use the
# cluster, a fresh one, so its jobs get the README's ids.
# A command that only reads the cluster (queue, topology, show, ...) runs
# again, for up to 15 s, until its lines before its first `...` match: the
# README shows a moment (the job RUNNING), and a user types slower than a
# script. In a block that submitted jobs, the README shows their output
# after the last command's `...` (what `make demo` prints after the commands
# it shows): each job's output file, once the job ended, is appended to the
# last command's output, its first line as written and then its rank lines
# sorted by rank, as scripts/demo.sh prints them (ranks write at once).
# A command must exit 0, unless its shown output has an `error:`: then it
# must fail.
#
# ```sh blocks: each command (a line and its `\` continuations; its comment
# is what follows a `#` that begins a word outside quotes, as bash reads it,
# so `nvcr.io#nvidia/...` is no comment and `# #SBATCH lines work too` is
# one) runs with bash, `set -e`, and must exit 0. What a comment shows as
# output is checked:
#   - `Submitted batch job N` on a submission: it prints that, with its id;
#   - `N_0 … N_99` on a submission: those array tasks exist (cohort show job);
#   - `#SBATCH lines work too`: the stand-in's `#SBATCH --job-name=train` named
#     the job;
#   - on a command that reads the cluster, the job and step ids (`14`,
#     `14.batch`, `1.0`) and column names (`MaxRSS`) the comment lists are in
#     its output (it runs again for up to 30 s until they are: steps start
#     after their job).
# A job a command cancels (`cohort cancel N`, `scancel N`) must then end,
# within 30 s.
#
# The README's job ids: the sh blocks name jobs by the ids a reader would
# have seen (`show job 1`, `-d afterok:12`, `why 13`, `-j 14`): the numbers
# after `job`, `cancel`, `scancel`, `requeue`, `why`, `-j` and `after…:`.
# In the order of their first mention (1, 12, 13, 14) they name the batch
# submissions of the sh blocks (`cohort submit`, `sbatch`), in order; each
# is replaced with the id its submission really got, in the commands and in
# the comments' claims. A submission that failed names no job, and a
# command naming its id fails saying so.
#
# Where commands run: $WORK/user, the user's clone: a link to each
# top-level entry of $ROOT (README's relative paths, etc/demo/hello.sh,
# tests/data/..., resolve as in the repository, and the jobs' output files
# land in $WORK, not in the repository), with build/default a link to the
# build under test ($BIN). HOME is $WORK/home; USER and SHELL are set as a
# login sets them when missing; PATH starts with $BIN/cli (`cohort` after
# `make build`, which the jobs' scripts call too); COHORT_CONTROLLER and
# COHORT_CONF are lib.sh's (README: "COHORT_CONTROLLER ... tells cohort
# where the controller is").
#
# Commands not run as written, each with the smallest change that keeps
# every option:
# | README                              | run as                                  | why                                   |
# |-------------------------------------|-----------------------------------------|---------------------------------------|
# | make demo / make test / make bench  | `TARGET:` is a rule of Makefile         | this test runs inside `make test`; it |
# | cmake --preset P, cmake --build     | P is a configure / build / test preset  | builds nothing (demo.sh's steps are   |
# |   --preset P, ctest --preset P      |   of CMakePresets.json                  |   the console block's commands)       |
# | cohort alloc -N 2 (a shell)         | the same, its shell reading `cohort run | it opens an interactive shell         |
# |                                     |   -- sh -c 'echo step on $NODE'` from   |                                       |
# |                                     |   stdin: each node must answer          |                                       |
# | srun ... --container-image=nvcr.io# | 1. as written, with --test-only: the    | no registry can be reached; a         |
# |   nvidia/pytorch:24.07-py3          |   controller takes the reference, the   |   squashfs file is an image form of   |
# |   --container-mounts=/lustre/data:  |   mounts and the workdir;               |   docs/containers.md that needs no    |
# |   /data,$HOME:/workspace ...        | 2. with the image $WORK/pytorch.sqsh    |   server; /lustre does not exist here |
# |   python train.py                   |   (busybox and a stand-in `python` that |   (skipped, saying so, unless root    |
# |                                     |   says its rank, folder and /data) and  |   with mksquashfs and busybox, as     |
# |                                     |   /lustre/data as $WORK/lustre/data:    |   container_test.sh)                  |
# |                                     |   each rank must answer, in /workspace  |                                       |
# | export PATH=$PWD/build/default/...  | as written ($PWD/build/default: $BIN)   |                                       |
# | train.sh, sweep.sh, eval.sh,        | stand-ins the test writes: a step whose | a user's own files                    |
# |   train.py                          |   ranks say who they are and wait to be |                                       |
# |                                     |   cancelled; echo and exit 0            |                                       |
# | python (cohort run ... python -c)   | python3 when PATH has no `python`       | Debian 12 has no `python`             |
#
# COHORT_README=FILE checks another copy of README.md (an edit before it is
# made).
[ -n "${COHORT_README:-}" ] && COHORT_README=$(realpath "$COHORT_README")
source "$(dirname "$0")/lib.sh"
README=${COHORT_README:-$ROOT/README.md}
[ -r "$README" ] || { fail "cannot read $README"; finish_test; }

# --- README.md's blocks, one file each: NN.LANG, lines "LINENO<tab>TEXT"
BLOCKS=$WORK/readme
mkdir -p "$BLOCKS"
awk -v dir="$BLOCKS" '
  /^```/ {
    if (!open) {
      open = 1; n++; lang = substr($0, 4); gsub(/[ \t]/, "", lang)
      if (lang == "") lang = "none"
      file = sprintf("%s/%02d.%s", dir, n, lang); printf "" >file
    } else { open = 0; close(file) }
    next
  }
  open { print NR "\t" $0 >file }' "$README"
ls "$BLOCKS" | grep . >/dev/null || { fail "README.md has no code block"; finish_test; }

start_cluster
export PATH="$BIN/cli:$PATH"
export USER=${USER:-$(id -un)} SHELL=${SHELL:-/bin/bash} HOME=$WORK/home
export RANK_PIDS=$WORK/rank-pids  # the stand-ins' ranks, for lib.sh's cleanup
unset SLURM_JOB_ID SLURM_JOBID SLURM_NODELIST SLURM_CONF
USERDIR=$WORK/user
mkdir -p "$USERDIR/build" "$HOME" "$WORK/lustre/data"
for entry in "$ROOT"/*; do
  [ "$(basename "$entry")" = build ] || ln -s "$entry" "$USERDIR/"
done
ln -s "$BIN" "$USERDIR/build/default"
cd "$USERDIR" || exit 1
if ! command -v python >/dev/null; then
  mkdir -p "$WORK/bin" && ln -s "$(command -v python3)" "$WORK/bin/python"
  export PATH="$PATH:$WORK/bin"
fi

# --- the user's own files, as stand-ins
cat >train.sh <<'SCRIPT'
#!/bin/sh
#SBATCH --job-name=train
# A stand-in for a training script: a step over the allocation whose ranks
# say who they are and wait to be cancelled.
cohort run -- sh -c 'echo $$ >>"$RANK_PIDS"; echo "train.sh rank $RANK of $WORLD_SIZE on $COHORT_NODENAME"; exec sleep 300'
SCRIPT
printf '#!/bin/sh\necho "sweep.sh task $SLURM_ARRAY_TASK_ID"\n' >sweep.sh
printf '#!/bin/sh\necho "eval.sh in job $SLURM_JOB_ID"\n' >eval.sh
chmod 755 train.sh sweep.sh eval.sh
printf 'import os\nprint("train.py rank", os.environ["RANK"])\n' >"$HOME/train.py"
echo "a shard" >"$WORK/lustre/data/shard-0"

# make_image: $WORK/pytorch.sqsh, the NGC image's stand-in: busybox and a
# `python` that says where each rank runs and what /data holds.
make_image() {
  local root=$WORK/image
  [ -s "$WORK/pytorch.sqsh" ] && return 0
  mkdir -p "$root/bin" "$root/usr/bin" || return 1
  cp /bin/busybox "$root/bin/busybox" || return 1
  local tool
  for tool in sh ls cat echo pwd; do ln -s busybox "$root/bin/$tool"; done
  cat >"$root/usr/bin/python" <<'PY'
#!/bin/sh
[ -r "$1" ] || { echo "python: can't open file '$1'" >&2; exit 2; }
echo "python $1: rank $RANK of $WORLD_SIZE in $(pwd); /data: $(ls /data)"
PY
  chmod 755 "$root/usr/bin/python"
  mksquashfs "$root" "$WORK/pytorch.sqsh" -quiet -noappend -all-root >/dev/null 2>&1
}

# --- matching console output
# normalise: the rules above, on stdin.
normalise() {
  sed -E -e 's/[[:space:]]+/ /g; s/ $//; s/^ ?\.\.\.$/.../' \
    -e ':a' -e 's/(^| )0:[0-5][0-9]( |$)/\10:<ss>\2/; ta' \
    -e 's/(master [0-9.]+):[0-9]+/\1:<port>/g'
}
# lines_match EXPECTED ACTUAL (names of arrays): glob matching of lines,
# `...` matching any run of lines.
lines_match() {
  local -n e=$1 a=$2
  local i=0 j=0 star=-1 mark=0
  while [ "$j" -lt "${#a[@]}" ]; do
    if [ "$i" -lt "${#e[@]}" ] && [ "${e[i]}" = ... ]; then
      star=$i mark=$j i=$((i + 1))
    elif [ "$i" -lt "${#e[@]}" ] && [ "${e[i]}" = "${a[j]}" ]; then
      i=$((i + 1)) j=$((j + 1))
    elif [ "$star" -ge 0 ]; then
      i=$((star + 1)) mark=$((mark + 1)) j=$mark
    else
      return 1
    fi
  done
  while [ "$i" -lt "${#e[@]}" ] && [ "${e[i]}" = ... ]; do i=$((i + 1)); done
  [ "$i" -eq "${#e[@]}" ]
}
# show_both EXPECTED ACTUAL: what differed, for a failure.
show_both() {
  local -n e=$1 a=$2
  echo "  expected (normalised):"; printf '    | %s\n' "${e[@]}"
  echo "  got (normalised):"; printf '    | %s\n' "${a[@]:0:40}"
  [ "${#a[@]}" -gt 40 ] && echo "    | ... ($((${#a[@]} - 40)) lines more)"
}

reads_cluster() {
  [[ $1 =~ ^(cohort[[:space:]]+(queue|show|why|history|priority|shares|topology|nodes)|squeue|sacct|sinfo|sprio|sshare|scontrol[[:space:]]+show)([[:space:]]|$) ]] &&
    [[ $1 != *[\;\&\|]* ]]
}

# run_cmd CMD [INPUT]: CMD with bash in the user's folder: OUT, RC.
run_cmd() {
  OUT=$(timeout 120 bash -c "set -e; $1" <<<"${2:-}" 2>&1)
  RC=$?
}

# --- console blocks
run_console() {
  local block=$1 cmds=() ats=() exps=() n=-1 no text
  while IFS=$'\t' read -r no text; do
    if [[ $text == '$ '* ]]; then
      n=$((n + 1)); cmds[n]=${text#'$ '}; ats[n]=$no; exps[n]=""
    elif [ "$n" -lt 0 ]; then
      fail "README.md:$no: a console block's line before its first \$ command: $text"
      return
    else
      exps[n]+="$text"$'\n'
    fi
  done <"$block"
  local k jobs=() expected=() prefix=() actual=() cmd at deadline id e
  for ((k = 0; k <= n; k++)); do
    cmd=${cmds[k]} at="README.md:${ats[k]}"
    COMMANDS=$((COMMANDS + 1))
    printf '%s' "${exps[k]}" | normalise >"$WORK/expected"
    mapfile -t expected <"$WORK/expected"
    [ -z "${exps[k]}" ] && expected=()
    # The lines up to the first `...`: matched at the start while retrying.
    prefix=()
    for e in "${expected[@]}"; do prefix+=("$e"); [ "$e" = ... ] && break; done
    deadline=$((SECONDS + 15))
    while :; do
      run_cmd "$cmd"
      mapfile -t actual < <(printf '%s\n' "$OUT" | normalise)
      [ -z "$OUT" ] && actual=()
      lines_match prefix actual && break
      reads_cluster "$cmd" && [ "$SECONDS" -lt "$deadline" ] || break
      sleep 0.2
    done
    id=$(sed -n 's/^Submitted \(batch \)\{0,1\}job \([0-9][0-9]*\)$/\2/p' <<<"$OUT")
    [ -n "$id" ] && jobs+=("$id")
    if [ "$k" -eq "$n" ] && [ "${#jobs[@]}" -gt 0 ]; then
      for id in "${jobs[@]}"; do
        wait_until 60 finished "$id" || fail "$at: job $id did not end: $(cohort queue)"
        state_is "$id" COMPLETED || fail "$at: job $id ended $(job_state "$id"): $(cat "cohort-$id.out" 2>&1)"
        [ -r "cohort-$id.out" ] || { fail "$at: job $id wrote no cohort-$id.out"; continue; }
        mapfile -t -O "${#actual[@]}" actual < <(
          { head -n 1 "cohort-$id.out"; tail -n +2 "cohort-$id.out" | sort -k2,2n; } | normalise)
      done
    fi
    if grep -q 'error:' <<<"${exps[k]}"; then
      [ "$RC" -ne 0 ] || fail "$at: \$ $cmd: exited 0; the README shows it failing"
    else
      [ "$RC" -eq 0 ] || fail "$at: \$ $cmd: exited $RC"
    fi
    if lines_match expected actual; then
      pass "$at: \$ $cmd: its output is the README's"
    else
      fail "$at: \$ $cmd: its output is not the README's"
      show_both expected actual
    fi
  done
}

# --- sh blocks
# split_comment LINE: CMD, the command as bash runs it, and COMMENT.
split_comment() {
  local line=$1 i c q="" prev=" "
  CMD=$line COMMENT=""
  for ((i = 0; i < ${#line}; i++)); do
    c=${line:i:1}
    if [ -n "$q" ]; then
      if [ "$c" = "$q" ]; then q=""
      elif [ "$c" = '\' ] && [ "$q" = '"' ]; then i=$((i + 1)); fi
    elif [ "$c" = "'" ] || [ "$c" = '"' ]; then q=$c
    elif [ "$c" = '\' ]; then i=$((i + 1))
    elif [ "$c" = '#' ] && [[ $prev == [[:space:]\;\&\|\(] ]]; then
      CMD=${line:0:i} COMMENT=${line:i+1}
      break
    fi
    prev=$c
  done
  CMD="${CMD%"${CMD##*[![:space:]]}"}"
  COMMENT="${COMMENT#"${COMMENT%%[![:space:]]*}"}"
}
ID_WORDS='(^|[^[:alnum:]_-])(job|cancel|scancel|requeue|why|-j|after[a-z]*:)[[:space:]]*([0-9]+)'
# ids_named TEXT: the README job ids TEXT names, one a line.
ids_named() {
  local rest=$1
  while [[ $rest =~ $ID_WORDS ]]; do
    echo "${BASH_REMATCH[3]}"
    rest=${rest#*"${BASH_REMATCH[0]}"}
  done
}
# real_id N: the id README's job N really got (N itself when the README
# names no job N); fails, saying why, when its submission gave none.
real_id() {
  local k
  for k in "${!IDS[@]}"; do
    [ "${IDS[k]}" = "$1" ] || continue
    if [ -n "${SUBMITTED[k]:-}" ]; then echo "${SUBMITTED[k]}"; return 0; fi
    echo "README job $1 is the README's batch submission number $((k + 1)), which gave no job" >&2
    return 1
  done
  echo "$1"
}
is_readme_id() { local id; for id in "${IDS[@]}"; do [ "$id" = "$1" ] && return 0; done; return 1; }
# map_ids TEXT: TEXT with the README's job ids replaced by the real ones.
map_ids() {
  local rest=$1 out="" m n real
  while [[ $rest =~ $ID_WORDS ]]; do
    m=${BASH_REMATCH[0]} n=${BASH_REMATCH[3]}
    real=$(real_id "$n") || return 1
    out+=${rest%%"$m"*}${m%"$n"}$real
    rest=${rest#*"$m"}
  done
  echo "$out$rest"
}
# claims COMMENT: what COMMENT shows of a command's output: job and step
# ids of the README's jobs (real ones), one a line as "id TOKEN", and
# column names (CamelCase words), as "word WORD".
claims() {
  local word base real
  for word in $1; do
    word=${word%[,;:.)]} word=${word#(}
    if [[ $word =~ ^([0-9]+)(\.[a-z0-9]+|_[0-9]+)?$ ]]; then
      base=${BASH_REMATCH[1]}
      is_readme_id "$base" || continue
      real=$(real_id "$base" 2>/dev/null) || { echo "unbound $word"; continue; }
      echo "id $real${word#"$base"}"
    elif [[ $word =~ ^[A-Z][a-z]+[A-Z][A-Za-z]*$ ]]; then
      echo "word $word"
    fi
  done
}
# shows_claims CLAIMS OUTPUT: every claim is in OUTPUT.
shows_claims() {
  local kind token
  while read -r kind token; do
    case $kind in
      id) grep -Eq "(^|[^[:alnum:]._])${token//./\\.}($|[^[:alnum:]._])" <<<"$2" || return 1 ;;
      word) grep -qiw -- "$token" <<<"$2" || return 1 ;;
      *) return 1 ;;
    esac
  done <<<"$1"
}

# check_build AT CMD: each make target and CMake preset CMD names exists.
check_build() {
  local at=$1 rest=$2 part parts=() kind
  while [[ $rest == *'&&'* ]]; do parts+=("${rest%%&&*}"); rest=${rest#*&&}; done
  parts+=("$rest")
  for part in "${parts[@]}"; do
    read -r -a words <<<"$part"
    part=${words[*]}
    if [[ $part =~ ^make\ ([A-Za-z0-9_-]+)$ ]]; then
      grep -Eq "^${BASH_REMATCH[1]}:" "$ROOT/Makefile" &&
        pass "$at: $part: Makefile has the target" ||
        fail "$at: $part: Makefile has no target ${BASH_REMATCH[1]}"
      continue
    fi
    if [[ $part =~ ^cmake\ --preset\ ([A-Za-z0-9_-]+)$ ]]; then kind=configurePresets
    elif [[ $part =~ ^cmake\ --build\ --preset\ ([A-Za-z0-9_-]+)$ ]]; then kind=buildPresets
    elif [[ $part =~ ^ctest\ --preset\ ([A-Za-z0-9_-]+)$ ]]; then kind=testPresets
    else
      fail "$at: $part: the test does not know how to check this build command"
      continue
    fi
    python3 -c 'import json, sys
presets = json.load(open(sys.argv[1])).get(sys.argv[2], [])
sys.exit(0 if any(p.get("name") == sys.argv[3] for p in presets) else 1)' \
      "$ROOT/CMakePresets.json" "$kind" "${BASH_REMATCH[1]}" &&
      pass "$at: $part: CMakePresets.json has it ($kind)" ||
      fail "$at: $part: CMakePresets.json has no ${BASH_REMATCH[1]} in $kind"
  done
}

# run_sh AT CMD COMMENT: one command of an sh block.
run_sh() {
  local at=$1 cmd=$2 comment=$3 run as="" id want claimed deadline nodes tpn
  COMMANDS=$((COMMANDS + 1))
  if [[ $cmd =~ ^(make|cmake|ctest)[[:space:]] ]]; then check_build "$at" "$cmd"; return; fi
  if [[ $cmd =~ ^export[[:space:]] ]]; then
    eval "$cmd" && pass "$at: $cmd" || fail "$at: $cmd failed"
    return
  fi
  local submits=0
  [[ $cmd =~ ^(cohort[[:space:]]+submit|sbatch)[[:space:]] ]] && submits=1
  if ! run=$(map_ids "$cmd" 2>"$WORK/map.err"); then
    fail "$at: $cmd: $(cat "$WORK/map.err")"
    [ "$submits" = 1 ] && SUBMITTED+=("")
    return
  fi
  [ "$run" != "$cmd" ] && as=" (as: $run)"

  # cohort alloc / salloc without a command: a shell; it reads one step.
  if [[ $run =~ ^(cohort[[:space:]]+alloc|salloc)([[:space:]]|$) ]] && [[ $run != *' -- '* ]]; then
    nodes=1; [[ $run =~ (-N|--nodes)[=[:space:]]*([0-9]+) ]] && nodes=${BASH_REMATCH[2]}
    run_cmd "$run" "cohort run -- sh -c 'echo \"step on \$COHORT_NODENAME\"'"
    if [ "$RC" -eq 0 ] && [ "$(grep -c '^step on node' <<<"$OUT")" -eq "$nodes" ]; then
      pass "$at: $cmd (its shell ran \`cohort run\`: a step on each of its $nodes nodes)"
    else
      fail "$at: $cmd, its shell running \`cohort run\`: exit $RC: $OUT"
    fi
    return
  fi

  # The NGC container line: as written with --test-only, then with a local image.
  if [[ $run == *--container-image=* ]]; then
    run_cmd "${run%%[[:space:]]*} --test-only ${run#*[[:space:]]}"
    if [ "$RC" -eq 0 ] && grep -q '^would_run_on' <<<"$OUT"; then
      pass "$at: ${cmd%% *} --test-only ${cmd#* }: the controller takes it as written"
    else
      fail "$at: ${cmd%% *} --test-only ${cmd#* }: exit $RC: $OUT"
    fi
    if [ "$(id -u)" != 0 ] || ! command -v mksquashfs >/dev/null || [ ! -x /bin/busybox ]; then
      echo "skip: $at: running it needs root, mksquashfs and /bin/busybox (a local image)"
      return
    fi
    make_image || { fail "$at: mksquashfs could not make the stand-in image"; return; }
    run=$(sed -E -e "s|--container-image=[^[:space:]]+|--container-image=$WORK/pytorch.sqsh|" \
      -e "s|/lustre/data|$WORK/lustre/data|g" <<<"$run")
    nodes=1; [[ $run =~ (-N|--nodes)[=[:space:]]*([0-9]+) ]] && nodes=${BASH_REMATCH[2]}
    tpn=1; [[ $run =~ --ntasks-per-node[=[:space:]]*([0-9]+) ]] && tpn=${BASH_REMATCH[1]}
    local workdir=/; [[ $run =~ --container-workdir=([^[:space:]]+) ]] && workdir=${BASH_REMATCH[1]}
    run_cmd "$run"
    local ranks
    ranks=$(grep -Ec "^python [^ ]+: rank [0-9]+ of $((nodes * tpn)) in $workdir; /data: shard-0$" <<<"$OUT")
    if [ "$RC" -eq 0 ] && [ "$ranks" -eq $((nodes * tpn)) ]; then
      pass "$at: $cmd (as: $run): $ranks ranks in the image's containers, in $workdir, /data mounted"
    else
      fail "$at: $cmd (as: $run): exit $RC, $ranks good rank lines: $OUT"
    fi
    return
  fi

  claimed=$(claims "$(map_ids "$comment" 2>/dev/null || echo "$comment")")
  deadline=$((SECONDS + 30))
  while :; do
    run_cmd "$run"
    [ "$RC" -eq 0 ] || break
    reads_cluster "$run" && [ -n "$claimed" ] || break
    grep -q '^unbound' <<<"$claimed" && break
    shows_claims "$claimed" "$OUT" && break
    [ "$SECONDS" -lt "$deadline" ] || break
    sleep 0.2
  done
  if [ "$submits" = 1 ]; then
    id=$(sed -n 's/^Submitted \(batch \)\{0,1\}job \([0-9][0-9]*\)$/\2/p' <<<"$OUT")
    SUBMITTED+=("$id")
  fi
  if [ "$RC" -ne 0 ]; then
    fail "$at: $cmd$as: exit $RC: $OUT"
    return
  fi
  pass "$at: $cmd$as"
  # A job it cancels ends (its nodes come back).
  local rest=$run
  while [[ $rest =~ (^|[^[:alnum:]_])s?cancel[[:space:]]+([0-9]+) ]]; do
    id=${BASH_REMATCH[2]} rest=${rest#*"${BASH_REMATCH[0]}"}
    wait_until 30 finished "$id" && pass "$at: job $id, cancelled, ended $(job_state "$id")" ||
      fail "$at: job $id, cancelled, is still $(job_state "$id") 30 s later: $(cohort queue)"
  done
  if [ "$submits" = 1 ]; then
    [ -n "$id" ] || { fail "$at: $cmd: no job id in \"$OUT\""; return; }
    # The comment's output: `Submitted batch job N`, `N_0 … N_99`, #SBATCH.
    if [[ $comment =~ (Submitted( batch)? job)[[:space:]]+([0-9]+) ]]; then
      want="${BASH_REMATCH[1]} $id"
      [ "$OUT" = "$want" ] && pass "$at: it printed \"$want\", as its comment says" ||
        fail "$at: it printed \"$OUT\", not \"$want\" as its comment says"
    fi
    local task
    for task in $(grep -Eo '(^|[[:space:]])[0-9]+_[0-9]+' <<<"$comment" | sed -E 's/.*_//'); do
      cohort show job "${id}_$task" >/dev/null 2>&1 && pass "$at: array task ${id}_$task exists" ||
        fail "$at: no array task ${id}_$task, which its comment names"
    done
    if [[ $comment == *'#SBATCH'* ]]; then
      want=$(sed -n 's/^#SBATCH --job-name=//p' "${run##* }" 2>/dev/null)
      grep -q "\"name\": *\"$want\"" <<<"$(cohort show job "$id" --json)" &&
        pass "$at: the script's #SBATCH --job-name=$want named job $id" ||
        fail "$at: job $id is not named $want by its #SBATCH line: $(cohort show job "$id")"
    fi
  elif [ -n "$claimed" ]; then
    if reads_cluster "$run" && shows_claims "$claimed" "$OUT"; then
      pass "$at: its output shows $(cut -d' ' -f2 <<<"$claimed" | paste -sd' '), as its comment says"
    elif reads_cluster "$run"; then
      fail "$at: its output lacks some of $(cut -d' ' -f2 <<<"$claimed" | paste -sd' ') (its comment): $OUT"
    fi
  fi
}

# run_sh_block FILE
run_sh_block() {
  local no text at cont=""
  while IFS=$'\t' read -r no text; do
    if [ -n "$cont" ]; then
      cont+=$text
    else
      cont=$text at="README.md:$no"
    fi
    if [[ $cont == *'\' ]]; then cont=${cont%'\'}; continue; fi
    split_comment "$cont"
    cont=""
    [ -n "$CMD" ] || continue
    run_sh "$at" "$CMD" "$COMMENT"
  done <"$1"
}

# The README's job ids, in order of first mention in the sh blocks' commands.
IDS=() SUBMITTED=()
for block in "$BLOCKS"/*.sh; do
  [ -e "$block" ] || continue
  cont=""
  while IFS=$'\t' read -r _ text; do
    cont+=$text
    if [[ $cont == *'\' ]]; then cont=${cont%'\'}; continue; fi
    split_comment "$cont"
    cont=""
    for id in $(ids_named "$CMD"); do is_readme_id "$id" || IDS+=("$id"); done
  done <"$block"
done
echo "README's job ids, naming its batch submissions in order: ${IDS[*]:-none}"

COMMANDS=0
for block in "$BLOCKS"/*; do
  name=$(basename "$block")
  case ${name#*.} in
    console) run_console "$block" ;;
    sh) run_sh_block "$block" ;;
    *) fail "README.md: a \`\`\`${name#*.} block (line $(head -n 1 "$block" | cut -f1)): the test runs only console and sh blocks" ;;
  esac
done
echo "ran $COMMANDS commands of README.md's $(ls "$BLOCKS" | wc -l) code blocks"

# Everything still queued goes, and its ranks with it.
queued() { cohort queue --noheader -o '%i' 2>/dev/null | sed 's/_.*//' | sort -u; }
for id in $(queued); do cohort cancel "$id" >/dev/null 2>&1; done
queue_empty() { [ -z "$(queued)" ]; }
wait_until 30 queue_empty || fail "jobs left after cancelling: $(cohort queue)"
finish_test
