#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Packaging: `cmake --install` into a scratch root (DESTDIR) lays out the
# programs, Slurm's front-ends, /etc/cohort, the systemd units and the man
# pages; `systemd-analyze verify` passes on the units; `cpack -G DEB` makes
# the four packages with what each should hold.
#   packaging_test.sh BUILD_DIR REPO_ROOT
set -uo pipefail
BUILD=$(cd "${1:?usage: packaging_test.sh BUILD_DIR REPO_ROOT}" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cohort-pkg.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
FAILURES=0
fail() { echo "FAIL: $*"; FAILURES=$((FAILURES + 1)); }
pass() { echo "ok: $*"; }

DESTDIR="$WORK/root" cmake --install "$BUILD" --prefix /usr >"$WORK/install.log" 2>&1 ||
  { fail "cmake --install: $(tail -5 "$WORK/install.log")"; exit 1; }
root=$WORK/root
for file in usr/bin/cohort usr/bin/cohort-agent usr/bin/cohort-stepd usr/bin/cohort-image \
  usr/sbin/cohort-controller \
  etc/cohort/cohort.conf etc/cohort/topology.conf \
  usr/lib/systemd/system/cohort-controller.service usr/lib/systemd/system/cohort-agent.service \
  usr/share/man/man1/cohort.1.gz usr/share/man/man8/cohort-controller.8.gz \
  usr/share/man/man8/cohort-agent.8.gz; do
  [ -e "$root/$file" ] || fail "cmake --install did not lay out /$file"
done
for command in sbatch srun salloc squeue scancel sinfo sacct scontrol; do
  [ "$(readlink "$root/usr/libexec/cohort/slurm/$command")" = ../../../bin/cohort ] ||
    fail "/usr/libexec/cohort/slurm/$command is not a link to cohort"
done
"$root/usr/libexec/cohort/slurm/squeue" --help >/dev/null 2>&1 ||
  fail "the installed squeue front-end does not run"
zcat "$root/usr/share/man/man1/cohort.1.gz" >"$WORK/cohort.1"
grep -q '^\.TH COHORT "1"' "$WORK/cohort.1" || fail "cohort.1 is no man page: $(head -3 "$WORK/cohort.1")"
zcat "$root/usr/share/man/man8/cohort-agent.8.gz" >"$WORK/agent.8"
grep -q 'spool' "$WORK/agent.8" ||
  fail "cohort-agent.8 does not hold the agent's options"
pass "cmake --install lays out programs, front-ends, /etc/cohort, units and man pages"

agent=$root/usr/lib/systemd/system/cohort-agent.service
controller=$root/usr/lib/systemd/system/cohort-controller.service
for line in KillMode=process Delegate=yes Restart=on-failure; do
  grep -qx "$line" "$agent" || fail "cohort-agent.service lacks $line"
done
grep -qx Restart=on-failure "$controller" || fail "cohort-controller.service lacks Restart=on-failure"
grep -qx 'ExecReload=/bin/kill -HUP $MAINPID' "$controller" ||
  fail "cohort-controller.service has no ExecReload (systemctl reload: SIGHUP)"
if command -v systemd-analyze >/dev/null; then
  # The units are verified in the scratch root (their ExecStart= must be
  # there), beside this host's own units (the targets they are ordered
  # after); the man pages of Documentation= were checked above.
  cp -rn /usr/lib/systemd/system/. "$root/usr/lib/systemd/system/"
  # ExecReload='s kill, which every Debian host has (procps).
  mkdir -p "$root/bin" && cp /bin/kill "$root/bin/kill"
  systemd-analyze verify --man=no --root="$root" /usr/lib/systemd/system/cohort-controller.service \
    /usr/lib/systemd/system/cohort-agent.service >"$WORK/verify.log" 2>&1 ||
    fail "systemd-analyze verify: $(cat "$WORK/verify.log")"
  pass "the units keep jobs across agent restarts and pass systemd-analyze verify"
else
  fail "systemd-analyze is not installed (scripts/install-deps.sh)"
fi

(cd "$WORK" && cpack -G DEB --config "$BUILD/CPackConfig.cmake" -B "$WORK/debs" \
  >"$WORK/cpack.log" 2>&1) || { fail "cpack -G DEB: $(tail -5 "$WORK/cpack.log")"; exit 1; }
deb() { ls "$WORK"/debs/"$1"_*.deb 2>/dev/null | head -1; }
# Each package's list, read whole (a grep -q that stops early would fail
# the pipe).
for package in cohort-common cohort-client cohort-controller cohort-agent; do
  dpkg-deb -c "$(deb "$package")" >"$WORK/$package.list" 2>/dev/null
done
for package in cohort-common cohort-client cohort-controller cohort-agent; do
  [ -n "$(deb "$package")" ] || fail "cpack made no $package package: $(ls "$WORK/debs")"
done
holds() { grep -q " \./$2$" "$WORK/$1.list"; }
holds cohort-client usr/bin/cohort || fail "cohort-client lacks /usr/bin/cohort"
grep -q "usr/libexec/cohort/slurm/sbatch -> ../../../bin/cohort" "$WORK/cohort-client.list" ||
  fail "cohort-client lacks the sbatch front-end"
holds cohort-controller usr/sbin/cohort-controller || fail "cohort-controller lacks its program"
holds cohort-controller usr/lib/systemd/system/cohort-controller.service ||
  fail "cohort-controller lacks its unit"
holds cohort-agent usr/bin/cohort-stepd || fail "cohort-agent lacks cohort-stepd"
holds cohort-agent usr/bin/cohort-image || fail "cohort-agent lacks cohort-image"
holds cohort-agent usr/lib/systemd/system/cohort-agent.service || fail "cohort-agent lacks its unit"
dpkg-deb -I "$(deb cohort-common)" conffiles >"$WORK/conffiles" 2>&1
grep -qx /etc/cohort/cohort.conf "$WORK/conffiles" ||
  fail "cohort.conf is no conffile: $(dpkg-deb -I "$(deb cohort-common)" conffiles)"
dpkg-deb -f "$(deb cohort-agent)" Depends >"$WORK/depends"
grep -q "munge" "$WORK/depends" ||
  fail "cohort-agent does not depend on munge: $(dpkg-deb -f "$(deb cohort-agent)" Depends)"
pass "cpack -G DEB makes cohort-common, -client, -controller and -agent ($(du -ch "$WORK"/debs/*.deb | tail -1 | cut -f1))"

[ "$FAILURES" -eq 0 ] || { echo "$FAILURES failed"; exit 1; }
echo "all checks passed"
