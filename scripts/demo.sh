#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make demo`: a local cluster of 16 emulated nodes under 4 leaf switches,
# one multi-node job on it, and what a user sees; then a job that survives
# the controller being killed. Everything runs on 127.0.0.1 in a temporary
# folder and is stopped at the end.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$root/build/default}
work=$(mktemp -d "${TMPDIR:-/tmp}/cohort-demo.XXXXXX")
pids=()
stop() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap stop EXIT
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
cohort() { echo "\$ cohort $*" >&2; "$bin/cli/cohort" "$@"; }

# Users and agents prove who they are with MUNGE credentials, as on a real
# cluster, and the controller's TCP port speaks TLS: a munged and a CA of the
# demo's own, in its folder (docs/operations.md#security).
source "$root/scripts/local_credentials.sh"
chmod 755 "$work"
start_munged "$work/munge" || exit 1
pids+=("$MUNGED_PID")
make_ca "$work/tls" "demo CA" &&
  sign_certificate "$work/tls" controller "IP:127.0.0.1,DNS:localhost" ||
  { cat "$work/tls/openssl.log"; exit 1; }
cat >"$work/cohort.conf" <<CONF
StateDir=$work/state
AuthType=munge
AuthInfo=socket=$work/munge/munge.socket
TLSCertFile=$work/tls/controller.pem
TLSKeyFile=$work/tls/controller.key
TLSCAFile=$work/tls/ca.pem
ControllerAddr=127.0.0.1
TopologyFile=$root/etc/demo/topology.conf
Include=$root/etc/demo/cluster.conf
CONF

say "starting cohort-controller and an agent emulating 16 nodes (logs in $work)"
start_controller() {
  rm -f "$work/port" "$work/http-port"
  "$bin/daemons/controller/cohort-controller" -c "$work/cohort.conf" --port "$1" \
    --port-file "$work/port" --http-port "${2:-0}" --http-port-file "$work/http-port" \
    >>"$work/controller.log" 2>&1 &
  controller=$!
  pids+=("$controller")
  for _ in $(seq 100); do [ -s "$work/port" ] && [ -s "$work/http-port" ] && break; sleep 0.1; done
  [ -s "$work/http-port" ] || { cat "$work/controller.log"; exit 1; }
}
job_state() {
  "$bin/cli/cohort" show job "$1" --json 2>/dev/null | sed -n 's/.*"state": *"\([A-Z_]*\)".*/\1/p' | head -1
}
start_controller 0
web="https://127.0.0.1:$(cat "$work/http-port")"
echo "metrics for Prometheus: $web/metrics (HTTPS, signed by the demo's CA: $work/tls/ca.pem)"
"$bin/daemons/agent/cohort-agent" -c "$work/cohort.conf" --controller "127.0.0.1:$(cat "$work/port")" \
  --emulate 16 --nodes 'node[01-16]' --spool "$work/spool" >"$work/agent.log" 2>&1 &
pids+=($!)
export COHORT_CONTROLLER="unix:$work/state/cohort.sock" COHORT_CONF="$work/cohort.conf"
for _ in $(seq 100); do
  states=$("$bin/cli/cohort" nodes -N --json 2>/dev/null | sed -n '/"nodes"/,$ s/.*"state": *"\([A-Z_]*\)".*/\1/p' || true)
  [ -n "$states" ] && ! grep -Eq 'UNKNOWN|DOWN' <<<"$states" && break
  sleep 0.1
done
cohort nodes
token=$("$bin/cli/cohort" token --lifespan 3600 | sed -n 's/^COHORT_TOKEN=//p')
echo "the dashboard: $web/#token=$token"
echo "  (the browser does not know the demo's CA; DEMO_KEEP=1 make demo keeps the cluster up to look)"

say "submitting a 4-node x 2-rank job (etc/demo/hello.sh) over TCP, as from a login node (MUNGE identity, TLS): the script runs once, its step on every node"
export PATH="$bin/cli:$PATH"  # the jobs call cohort (cohort run, cohort checkpoint-done)
cd "$work"
echo "\$ export COHORT_CONTROLLER=127.0.0.1:$(cat "$work/port")" >&2
out=$(COHORT_CONTROLLER="127.0.0.1:$(cat "$work/port")" cohort submit "$root/etc/demo/hello.sh")
echo "$out"
id=${out##* }
sleep 0.5
cohort queue
cohort topology

say "waiting for job $id"
for _ in $(seq 300); do
  state=$(job_state "$id")
  case "$state" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL) break ;; esac
  sleep 0.1
done
cohort show job "$id"

say "output of job $id ($work/cohort-$id.out)"
# The batch script's line, then its step's ranks in rank order (they write
# at once, and their lines arrive in any order).
{ head -n 1 "$work/cohort-$id.out"; tail -n +2 "$work/cohort-$id.out" | sort -k2,2n; }
[ "$state" = COMPLETED ] || { echo "demo job ended $state"; exit 1; }

say "the same with Slurm's commands ($bin/cli/slurm first on PATH)"
slurm() { echo "\$ $*" >&2; PATH="$bin/cli/slurm:$PATH" "$@"; }
sid=$(slurm sbatch --parsable -N 2 --ntasks-per-node=2 --gpus=4 -J slurm-hello -o "$work/slurm-%j.out" \
  --wrap 'srun sh -c "echo rank \$SLURM_PROCID on \$COHORT_NODENAME sees CUDA_VISIBLE_DEVICES=\$CUDA_VISIBLE_DEVICES"')
echo "$sid"
for _ in $(seq 100); do [ "$(job_state "$sid")" = COMPLETED ] && break; sleep 0.1; done
slurm sacct -j "$sid" -o JobID,JobName,State,ExitCode,NNodes,NodeList
sort "$work/slurm-$sid.out"
slurm sinfo

say "nothing acknowledged is lost: a 4-node job runs while the controller is killed with -9"
out=$(cohort submit -N 4 -J long -o "$work/long-%j.out" -- sh -c 'sleep 6; echo "rank $RANK done"')
echo "$out"
long=${out##* }
for _ in $(seq 100); do [ "$(job_state "$long")" = RUNNING ] && break; sleep 0.1; done
echo "\$ kill -9 $controller   # the controller"
kill -9 "$controller"
wait "$controller" 2>/dev/null || true
echo "\$ cohort-controller -c $work/cohort.conf --port $(cat "$work/port")   # started again"
start_controller "$(cat "$work/port")" "$(cat "$work/http-port")"
cohort queue
for _ in $(seq 300); do
  state=$(job_state "$long")
  case "$state" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL) break ;; esac
  sleep 0.1
done
cohort history -j "$long"
[ "$state" = COMPLETED ] || { echo "job $long ended $state"; exit 1; }

say "preemption: a low-priority sweep fills the cluster, then a high-tier 4-node job arrives"
out=$(cohort submit --array=0-15 -A research -o "$work/sweep-%A_%a.out" "$root/etc/demo/sweep.sh")
echo "$out"
sweep=${out##* }
for _ in $(seq 100); do
  [ "$("$bin/cli/cohort" queue --noheader -t RUNNING -o '%i' 2>/dev/null | grep -c "^${sweep}_")" -ge 16 ] && break
  sleep 0.1
done
cohort queue
out=$(cohort submit -p high -A pretrain -N 4 --gpus-per-node=8 -J pretrain -o "$work/pretrain-%j.out" \
  -- sh -c 'echo "rank $RANK on $COHORT_NODENAME"; sleep 3')
echo "$out"
big=${out##* }
submitted=$(date +%s%N)
for _ in $(seq 200); do [ "$(job_state "$big")" = RUNNING ] && break; sleep 0.05; done
started=$(date +%s%N)
echo "job $big RUNNING $(( (started - submitted) / 1000000 )) ms after it was submitted" \
  "(PreemptGraceTime=10 s; the victims said checkpoint-done)"
cohort queue
first=$(grep -l "preemption warning" "$work"/sweep-"$sweep"_*.out | head -1)
say "a victim's output ($first)"
cat "$first"
task=$(basename "$first" .out); task=${task##*_}
cohort show job "${sweep}_$task"
cohort why "$big" || true

say "waiting for the pretrain job and the requeued sweep tasks"
for _ in $(seq 600); do
  pending=$("$bin/cli/cohort" queue --noheader -o '%i' 2>/dev/null | grep -c "^${sweep}\|^${big}$" || true)
  [ "$pending" -eq 0 ] && break
  sleep 0.1
done
say "the victim ran again and resumed from its checkpoint ($first)"
cat "$first"
cohort history -j "$big"
cohort shares
for t in $(seq 0 15); do
  s=$(job_state "${sweep}_$t")
  [ "$s" = COMPLETED ] || { echo "sweep task $t ended ${s:-unknown}"; exit 1; }
done
grep -q "resuming from" "$first" || { echo "the victim did not run again"; exit 1; }
say "what Prometheus scrapes: curl --cacert $work/tls/ca.pem $web/metrics (3 of its lines)"
curl -s --cacert "$work/tls/ca.pem" "$web/metrics" |
  grep -E '^cohort_jobs_ended_total|^cohort_preemptions_total|^cohort_leaf_gpus\{switch="leaf1",state="free"' | head -3
say "done: jobs $id and $long COMPLETED; the sweep was preempted, requeued and COMPLETED"
if [ "${DEMO_KEEP:-0}" = 1 ]; then
  say "the cluster stays up: the dashboard is $web/#token=$token; Ctrl-C stops it"
  wait "$controller"
fi
