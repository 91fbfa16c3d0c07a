#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A against B: two builds of Cohort measured in turn on this machine, so
# that what the machine's load does to one it does to the other. Each round
# runs A B B A; each metric is reported as each build's median over every
# run, the ratio B / A of the medians, and the spread of that ratio over the
# rounds (each round's B mean over its A mean). docs/performance.md, "A/B".
#
#   bench/ab.sh OLD NEW [PARTS]
#
# OLD, NEW: commits (anything `git rev-parse` takes), each built in a
#   worktree of its own under AB_WORK; "." is this working tree as built in
#   build/default (build it first). The scripts of this working tree drive
#   both builds' binaries, so that the measuring is the same on both sides.
# PARTS (default "engine durability"):
#   engine       bench/scale/engine_scale (AB_ENGINE_NODES nodes, default
#                8192; AB_ENGINE_JOBS queued jobs, default 50000; 10 samples)
#   durability   bench/durability.sh on SQLite: durable submissions per second
#                at 1, 4 and 16 clients for each StateSync, and the restart
#                with AB_DURABLE_JOBS jobs in state (default 20000)
#   sbs:LIST     the Cohort side of bench/side_by_side.sh with SBS_PARTS=LIST
#                (comma-separated: dispatch,step,throughput,placement,queue,mpi)
# Environment: AB_ROUNDS (default 2), AB_WORK (default
#   ${TMPDIR:-/tmp}/cohort-ab), AB_TARGETS (what to build for a commit;
#   default every target, which the side-by-side parts need).
# Prints a table and writes $AB_WORK/ab-OLD-NEW.json.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
old=${1:?usage: bench/ab.sh OLD NEW [PARTS]}
new=${2:?usage: bench/ab.sh OLD NEW [PARTS]}
parts=${3:-engine durability}
rounds=${AB_ROUNDS:-2}
work=${AB_WORK:-${TMPDIR:-/tmp}/cohort-ab}
mkdir -p "$work"
work=$(cd "$work" && pwd)

# build_of COMMIT: the build folder of COMMIT, built if it is not yet.
build_of() {
  if [ "$1" = . ]; then
    [ -x "$root/build/default/cli/cohort" ] ||
      { echo "ab: build this working tree first (make build)" >&2; return 1; }
    echo "$root/build/default"
    return
  fi
  local sha tree
  sha=$(git -C "$root" rev-parse --short=12 "$1^{commit}") ||
    { echo "ab: '$1' is no commit here" >&2; return 1; }
  tree=$work/$sha
  if [ ! -d "$tree" ]; then
    git -C "$root" worktree add --detach "$tree" "$sha" >&2
  fi
  echo "ab: building $1 ($sha) in $tree/build/default" >&2
  (cd "$tree" && cmake --preset default -DCOHORT_BUILD_BENCH=ON >&2 &&
    cmake --build --preset default ${AB_TARGETS:+--target $AB_TARGETS} -- -j"$(nproc)" >&2)
  echo "$tree/build/default"
}

A=$(build_of "$old")
B=$(build_of "$new")
runs=$work/runs.jsonl  # {"build": "A", "round": R, "metric": M, "value": V, "better": "lower"}
: >"$runs"

# emit BUILD ROUND METRIC VALUE BETTER
emit() {
  printf '{"build": "%s", "round": %s, "metric": "%s", "value": %s, "better": "%s"}\n' \
    "$1" "$2" "$3" "$4" "$5" >>"$runs"
}

# measure LABEL BUILD_DIR ROUND: every part once with that build.
measure() {
  local label=$1 build=$2 round=$3 part out
  for part in $parts; do
    out=$work/run-$label-$round-$RANDOM
    mkdir -p "$out"
    case $part in
      engine)
        "$build/bench/scale/engine_scale" --nodes "${AB_ENGINE_NODES:-8192}" \
          --jobs "${AB_ENGINE_JOBS:-50000}" --samples 10 --json "$out/engine.json" >/dev/null
        python3 - "$out/engine.json" "$label" "$round" >>"$runs" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
def put(metric, value):
    print(json.dumps({"build": sys.argv[2], "round": int(sys.argv[3]), "metric": metric,
                      "value": value, "better": "lower"}))
put("engine fill (s)", r["fill_s"])
for case in ("submit", "first_pass", "pass_after_submit", "pass_after_end", "tick",
             "clock_full_pass"):
    put(f"engine {case} p50 (ms)", r[case]["p50_ms"])
PY
        ;;
      durability)
        BUILD=$build BACKENDS=sqlite bash "$root/bench/durability.sh" "${AB_DURABLE_JOBS:-20000}" \
          2000 >"$out/durability.txt"
        python3 - "$out/durability.txt" "$label" "$round" >>"$runs" <<'PY'
import json, sys
sync = None
for line in open(sys.argv[1]):
    if line.startswith("== durable submissions"):
        sync = line.split("StateSync=")[1].split()[0]
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    def put(metric, value, better):
        print(json.dumps({"build": sys.argv[2], "round": int(sys.argv[3]), "metric": metric,
                          "value": value, "better": better}))
    if "per_second" in r:
        put(f"durable submits/s, {r.get('sync', sync)}, {r['clients']} clients", r["per_second"],
            "higher")
    elif "restart_to_serving_ms" in r:
        put(f"restart with {r['jobs']} jobs (ms)", r["restart_to_serving_ms"], "lower")
PY
        ;;
      sbs:*)
        SBS_SYSTEMS=cohort SBS_PARTS="$(tr , ' ' <<<"${part#sbs:}")" BENCH_OUT=$out \
          bash "$root/bench/side_by_side.sh" "$build" >"$out/sbs.txt" 2>&1 ||
          { echo "ab: side by side failed with $build; see $out/sbs.txt" >&2; return 1; }
        python3 - "$out/side-by-side.json" "$label" "$round" >>"$runs" <<'PY'
import json, sys
for row in json.load(open(sys.argv[1]))["table"]:
    if isinstance(row.get("cohort"), (int, float)):
        print(json.dumps({"build": sys.argv[2], "round": int(sys.argv[3]), "metric": row["metric"],
                          "value": row["cohort"], "better": row["better"]}))
PY
        ;;
      *) echo "ab: unknown part '$part' (engine, durability, sbs:LIST)" >&2; return 2 ;;
    esac
  done
}

for round in $(seq 1 "$rounds"); do
  for label in A B B A; do
    echo "ab: round $round of $rounds, build $label" >&2
    if [ "$label" = A ]; then measure A "$A" "$round"; else measure B "$B" "$round"; fi
  done
done

python3 - "$runs" "$old" "$new" "$work/ab-${old//\//_}-${new//\//_}.json" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
metrics = list(dict.fromkeys(r["metric"] for r in runs))
rows = []
print(f"{'metric':44} {'better':7} {'A median':>11} {'B median':>11} {'B/A':>6} {'B/A by round':>16}")
for m in metrics:
    of = [r for r in runs if r["metric"] == m]
    a = [r["value"] for r in of if r["build"] == "A"]
    b = [r["value"] for r in of if r["build"] == "B"]
    if not a or not b:
        continue
    am, bm = statistics.median(a), statistics.median(b)
    by_round = []
    for rnd in sorted({r["round"] for r in of}):
        ra = [r["value"] for r in of if r["round"] == rnd and r["build"] == "A"]
        rb = [r["value"] for r in of if r["round"] == rnd and r["build"] == "B"]
        if ra and rb and statistics.mean(ra) > 0:
            by_round.append(statistics.mean(rb) / statistics.mean(ra))
    ratio = bm / am if am else float("nan")
    spread = f"{min(by_round):.2f}-{max(by_round):.2f}" if by_round else "-"
    print(f"{m:44} {of[0]['better']:7} {am:11.4g} {bm:11.4g} {ratio:6.2f} {spread:>16}")
    rows.append({"metric": m, "better": of[0]["better"], "a_median": am, "b_median": bm,
                 "ratio": ratio, "round_ratios": by_round, "a": a, "b": b})
json.dump({"a": sys.argv[2], "b": sys.argv[3], "rows": rows}, open(sys.argv[4], "w"), indent=2)
print(f"results written to {sys.argv[4]}")
PY
