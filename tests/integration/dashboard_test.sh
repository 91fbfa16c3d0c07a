#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The dashboard in Debian's real headless Chromium, against a cluster
# running jobs: the page loads over the REST API with a token, the queue
# shows the running and the pending job, the switch tree marks the leaves
# and nodes of the job the address selects, the job panel weighs its
# placement against the best possible, and a screenshot is saved in the
# test's folder. The HTTP port is plain here (IT_TLS=off): Chromium would
# need the test CA in an NSS database; the REST test covers HTTPS.
source "$(dirname "$0")/lib.sh"

browser=$(command -v chromium || command -v chromium-browser) ||
  { fail "chromium is not installed (scripts/install-deps.sh)"; exit 1; }
IT_TLS=off IT_HTTP=on start_cluster
base=$(IT_TLS=off web_base)

# A 4-node job on one leaf switch and a 1-node job run; one asking for
# every node waits for resources.
four=$(submit -N 4 --gpus-per-node 8 -J train -- sleep 300)
one=$(submit -N 1 --gpus-per-node 2 -J probe -- sleep 300)
wide=$(submit -N 16 --gpus-per-node 8 -J wide -- true)
running() { state_is "$four" RUNNING && state_is "$one" RUNNING; }
wait_until 30 running || fail "jobs $four and $one did not start"
considered() { [ "$(job_reason "$wide")" = Resources ]; }
wait_until 30 considered || fail "job $wide waits for $(job_reason "$wide")"
token=$(cohort token | sed -n 's/^COHORT_TOKEN=//p')
# A maintenance window an hour ahead, for the reservations' table.
"$BIN/cli/slurm/scontrol" create reservation ReservationName=window StartTime=now+3600 Duration=30 \
  Nodes=node16 Users=root Flags=MAINT >/dev/null || fail "scontrol create reservation failed"

# chromium URL ARGS...: the page after its scripts ran (virtual time lets
# the first refresh and the job's explanation arrive), as HTML on stdout.
chromium_run() {
  local url=$1; shift
  HOME="$WORK/chromium-home" timeout 60 "$browser" --headless=new --no-sandbox --disable-gpu \
    --no-first-run --disable-extensions --disable-dev-shm-usage \
    --user-data-dir="$WORK/chromium-profile" --virtual-time-budget=5000 \
    --window-size=1400,1100 "$@" "$url" 2>>"$WORK/chromium.log"
}
dom=$(chromium_run "$base/#token=$token&job=$four" --dump-dom)
echo "$dom" >"$WORK/dashboard.html"
[ -n "$dom" ] || { fail "chromium printed no page: $(tail -5 "$WORK/chromium.log")"; finish_test; }

for id in "$four" "$one" "$wide"; do
  grep -q "data-job-id=\"$id\"" <<<"$dom" || fail "the queue has no row for job $id"
done
python3 - "$WORK/dashboard.html" "$four" <<'PY' || fail "the dashboard's DOM is not as expected (see $WORK/dashboard.html)"
import sys
from html.parser import HTMLParser

class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.placed_leaves, self.placed_nodes, self.leaves, self.text = [], [], [], []
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if "data-switch" in a:
            self.leaves.append(a["data-switch"])
            if "placed" in classes: self.placed_leaves.append(a["data-switch"])
        if "data-node" in a and "placed" in classes: self.placed_nodes.append(a["data-node"])
    def handle_data(self, data): self.text.append(data)

page = Page()
page.feed(open(sys.argv[1]).read())
text = " ".join(page.text)
problems = []
if len(page.leaves) != 4: problems.append(f"leaves drawn: {page.leaves}")
if len(page.placed_leaves) != 1: problems.append(f"leaves marked for the 4-node job: {page.placed_leaves}")
if len(page.placed_nodes) != 4: problems.append(f"nodes marked for the 4-node job: {page.placed_nodes}")
if "best possible is 1" not in text: problems.append("no placement against the best possible")
if "optimal" not in text: problems.append("the placement is not called optimal")
if "RUNNING" not in text or "PENDING" not in text: problems.append("no RUNNING and PENDING states")
if "window" not in text or "MAINT" not in text: problems.append("the reservation window is not listed")
for p in problems: print("dashboard:", p)
sys.exit(1 if problems else 0)
PY
pass "the queue lists jobs $four, $one and $wide; the tree marks job $four's 4 nodes on 1 leaf, optimal; the maintenance window is listed"

chromium_run "$base/#token=$token&job=$four" --screenshot="$WORK/dashboard.png" >/dev/null
[ -s "$WORK/dashboard.png" ] && [ "$(head -c 4 "$WORK/dashboard.png" | tail -c 3)" = PNG ] ||
  fail "no screenshot: $(tail -5 "$WORK/chromium.log")"
mkdir -p "$BIN/tests/artifacts" && cp "$WORK/dashboard.png" "$BIN/tests/artifacts/dashboard.png"
pass "a screenshot is saved: $WORK/dashboard.png (and $BIN/tests/artifacts/dashboard.png)"

# Without a token the page still reads (PrivateData is off) and loads.
anon=$(chromium_run "$base/" --dump-dom)
grep -q "data-job-id=\"$four\"" <<<"$anon" || fail "the anonymous page shows no jobs"
pass "without a token the page reads anonymously"

for id in "$four" "$one"; do cohort cancel "$id" >/dev/null 2>&1; done
finish_test
