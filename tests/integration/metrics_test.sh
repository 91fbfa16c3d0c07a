#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The controller's /metrics, read by hand and scraped by Debian's real
# Prometheus on 127.0.0.1: jobs by state, partition and pending reason,
# GPUs by partition and leaf switch, the counters, and a scheduling pass
# duration quantile asked of Prometheus' HTTP API.
source "$(dirname "$0")/lib.sh"

command -v prometheus >/dev/null || { fail "prometheus is not installed (scripts/install-deps.sh)"; exit 1; }
IT_HTTP=on start_cluster
http=$(cat "$WORK/http-port")
metrics() { web -f "$(web_base)/metrics"; }

# A 2-node job (one leaf switch: the closest placement) and a 1-node job
# run, all 8 GPUs of each node; one asking for every node waits.
running=("$(submit -N 2 --gpus-per-node 8 -- sleep 300)" "$(submit -N 1 --gpus-per-node 8 -- sleep 300)")
waiting=$(submit -N 16 --gpus-per-node 8 -- true)
both_running() { state_is "${running[0]}" RUNNING && state_is "${running[1]}" RUNNING; }
wait_until 30 both_running || fail "jobs ${running[*]} did not start"
considered() { [ "$(job_reason "$waiting")" = Resources ]; }
wait_until 30 considered || fail "job $waiting waits for $(job_reason "$waiting"), not Resources"

out=$(metrics) || fail "GET /metrics failed"
grep -qx 'cohort_jobs{state="RUNNING",partition="gpu",reason=""} 2' <<<"$out" ||
  fail "running jobs: $(grep '^cohort_jobs{' <<<"$out")"
grep -qx 'cohort_jobs{state="PENDING",partition="gpu",reason="Resources"} 1' <<<"$out" ||
  fail "pending jobs: $(grep '^cohort_jobs{' <<<"$out")"
grep -qx 'cohort_gpus{partition="gpu",state="allocated"} 24' <<<"$out" ||
  fail "allocated GPUs: $(grep '^cohort_gpus{' <<<"$out")"
grep -qx 'cohort_jobs_submitted_total 3' <<<"$out" || fail "$(grep '^cohort_jobs_submitted' <<<"$out")"
grep -qx 'cohort_agent_streams 16' <<<"$out" || fail "$(grep '^cohort_agent_streams' <<<"$out")"
leaf_max=$(sed -n 's/^cohort_leaf_gpus{switch="[a-z0-9]*",state="allocated"} //p' <<<"$out" | sort -n | tail -1)
[ "${leaf_max:-0}" -ge 16 ] ||
  fail "the 2-node job is not under one leaf switch: $(grep '^cohort_leaf_gpus' <<<"$out")"
grep -q '^# TYPE cohort_scheduling_pass_seconds histogram$' <<<"$out" || fail "no pass histogram"
grep -q '^cohort_scheduling_pass_seconds_bucket{kind="[a-z-]*",le="+Inf"} [1-9]' <<<"$out" ||
  fail "no pass observed: $(grep '^cohort_scheduling_pass_seconds_count' <<<"$out")"
[ "$(web -o /dev/null -w '%{http_code}' "$(web_base)/nothing")" = 404 ] ||
  fail "an unknown path is not 404"
grep -qx 'cohort_rpc_seconds_count{method="SubmitJob"} 3' <<<"$out" ||
  fail "submissions timed: $(grep '^cohort_rpc_seconds_count' <<<"$out")"
grep -q '^cohort_store_commit_seconds_count [1-9]' <<<"$out" || fail "no commit timed"
grep -q '^cohort_store_commit_records_bucket{le="+Inf"} [1-9]' <<<"$out" || fail "no commit batch"
pass "/metrics counts jobs by state, partition and reason, GPUs by partition and leaf, RPCs and commits"

# The agent's own: launches, the stepd's start, GPUs held, on each node.
agent_http=$(cat "$WORK/agent-http-port")
agent_out=$(curl -sf "http://127.0.0.1:$agent_http/metrics") || fail "GET the agent's /metrics failed"
started_total=$(sed -n 's/^cohort_agent_launches_total{node="[a-z0-9]*",outcome="started"} //p' <<<"$agent_out" |
  awk '{ sum += $1 } END { print sum }')
[ "$started_total" = 3 ] || fail "the agent counts $started_total launches started, not 3"
held=$(grep -c '^cohort_agent_gpu_allocated{node="[a-z0-9]*",gpu="[0-7]"} 1$' <<<"$agent_out")
[ "$held" = 24 ] || fail "the agent says $held GPUs are held, not 24"
grep -q '^cohort_agent_stepd_start_seconds_count{node="[a-z0-9]*"} 1$' <<<"$agent_out" ||
  fail "no stepd start timed: $(grep '_count' <<<"$agent_out" | head -3)"
pass "the agent's /metrics: 3 launches started, 24 GPUs held, the stepd's start timed"

# The real Prometheus scrapes it every second, over HTTPS verified by the
# cluster's CA.
prom_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$WORK/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: cohort
    scheme: https
    tls_config:
      ca_file: $WORK/tls/ca.pem
    static_configs:
      - targets: ["127.0.0.1:$http"]
  - job_name: cohort-agent
    static_configs:
      - targets: ["127.0.0.1:$(cat "$WORK/agent-http-port")"]
YAML
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/prometheus" \
  --web.listen-address="127.0.0.1:$prom_port" >>"$WORK/prometheus.log" 2>&1 &
PIDS+=("$!")
query() { curl -sf --get "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1"; }
scraped() { query 'cohort_jobs{state="PENDING"}' | grep -q '"Resources"'; }
wait_until 60 scraped || fail "Prometheus has no cohort_jobs: $(query cohort_jobs) $(tail -3 "$WORK/prometheus.log")"
up=$(query 'up{job="cohort"}')
grep -q '"value":\[[0-9.]*,"1"\]' <<<"$up" || fail "the scrape target is not up: $up"
quantile=$(query 'histogram_quantile(0.9, sum by (le) (cohort_scheduling_pass_seconds_bucket))')
grep -Eq '"value":\[[0-9.]+,"[0-9.e+-]+"\]' <<<"$quantile" ||
  fail "no pass-duration quantile from Prometheus: $quantile"
echo "Prometheus: 90th percentile of scheduling passes: $(sed -n 's/.*"value":\[[0-9.]*,"\([^"]*\)"\].*/\1/p' <<<"$quantile") s"
agent_scraped() { query 'sum(cohort_agent_gpu_allocated)' | grep -q '"24"'; }
wait_until 30 agent_scraped || fail "Prometheus has no agent GPUs: $(query 'sum(cohort_agent_gpu_allocated)')"
pass "Prometheus scrapes the controller and the agent, and answers cohort_jobs, a pass-duration quantile and the GPUs held"

for id in "${running[@]}" "$waiting"; do cohort cancel "$id" >/dev/null; done
finish_test
