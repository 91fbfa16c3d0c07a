#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The table and the JSON of bench/side_by_side.sh from its results (lines of
# SYSTEM, PROFILE, METRIC, VALUE, NOTE, tab-separated). For each metric it
# takes Slurm's better profile and prints Cohort/Slurm.
#
#   bench/side_by_side_report.sh RESULTS.tsv OUT.json
set -euo pipefail
results=${1:?usage: side_by_side_report.sh RESULTS.tsv OUT.json}
json=${2:?usage: side_by_side_report.sh RESULTS.tsv OUT.json}
machine=$(printf '"nproc": %s, "memory_kib": %s, "kernel": "%s", "commit": "%s", "date": "%s"' \
  "$(nproc)" "$(awk '/MemTotal/ {print $2}' /proc/meminfo)" "$(uname -r)" \
  "$(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  "$(date -u +%Y-%m-%dT%H:%M:%SZ)")

awk -F'\t' -v json="$json" -v machine="$machine" '
function lower_is_better(m) { return m ~ /_ms$/ || m == "placement_extra_leaves" }
function numeric(v) { return v ~ /^[0-9.]+$/ }
function esc(s) { gsub(/\\/, "\\\\", s); gsub(/"/, "\\\"", s); return s }
function jv(v) { return numeric(v) ? v : "\"" esc(v) "\"" }
function count(note) { return match(note, /n=[0-9]+/) ? substr(note, RSTART + 2, RLENGTH - 2) + 0 : 0 }
# The dispatch figures of one size go together: p95 and max come from the
# profile with the better p50.
function group(m) { g = m; sub(/_(p50|p95|max)_ms$/, "", g); return g }
function decider(m) { return m ~ /^(dispatch|step)_/ ? group(m) "_p50_ms" : m }
function better(a, b, m) { return lower_is_better(m) ? a + 0 < b + 0 : a + 0 > b + 0 }
{
  sys = $1; prof = $2; m = $3; v = $4; note = $5
  rows[++n] = sprintf("{\"system\": \"%s\", \"profile\": \"%s\", \"metric\": \"%s\", \"value\": %s, \"note\": \"%s\"}",
                      sys, prof, m, jv(v), esc(note))
  if (m ~ /^load_average/) next  # in the JSON, not in the table
  if (!(m in seen)) { seen[m] = 1; order[++metrics] = m }
  if (sys == "cohort") { cohort[m] = v; next }
  value[prof, m] = v; size[prof, m] = count(note)
  if (!(prof in known)) { known[prof] = 1; profs[++nprofs] = prof }
}
END {
  # Per metric, Slurm profiles compete only at the largest job count measured
  # (a run of 200 jobs does not rate like one of 1,000), then on the value.
  for (i = 1; i <= metrics; i++) {
    m = order[i]; d = decider(m); best = ""; most = -1
    for (k = 1; k <= nprofs; k++) if (((profs[k], d) in size) && size[profs[k], d] > most) most = size[profs[k], d]
    for (k = 1; k <= nprofs; k++) {
      p = profs[k]
      if (!((p, d) in value) || size[p, d] != most) continue
      if (best == "" || (numeric(value[p, d]) && (!numeric(value[best, d]) || better(value[p, d], value[best, d], d))))
        best = p
    }
    if (best != "" && ((best, m) in value)) { slurm[m] = value[best, m]; sprof[m] = best }
  }
  printf "%-30s %-7s %12s %22s %14s\n", "metric", "better", "Cohort", "Slurm (profile)", "Cohort/Slurm"
  table = ""
  for (i = 1; i <= metrics; i++) {
    m = order[i]
    c = (m in cohort) ? cohort[m] : "n/a"
    s = (m in slurm) ? slurm[m] : "n/a"
    r = (numeric(c) && numeric(s) && s + 0 > 0) ? sprintf("%.2f", c / s) : "-"
    dir = lower_is_better(m) ? "lower" : "higher"
    printf "%-30s %-7s %12s %22s %14s\n", m, dir, c, s (m in sprof ? " (" sprof[m] ")" : ""), r
    table = table (i > 1 ? ",\n    " : "") sprintf("{\"metric\": \"%s\", \"better\": \"%s\", \"cohort\": %s, \"slurm\": %s, \"slurm_profile\": \"%s\", \"ratio\": %s}",
                    m, dir, jv(c), jv(s), sprof[m], r == "-" ? "null" : r)
  }
  printf "{\n  \"machine\": {%s},\n  \"table\": [\n    %s\n  ],\n  \"results\": [\n    ", machine, table > json
  for (i = 1; i <= n; i++) printf "%s%s", rows[i], (i < n ? ",\n    " : "\n") > json
  printf "  ]\n}\n" > json
}' "$results"
echo "results written to $json"
