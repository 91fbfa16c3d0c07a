#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A throwaway PostgreSQL 15 server for tests and benchmarks, in a folder of
# its own, listening only on a Unix socket there. initdb refuses root: as
# root the server runs as the unprivileged user cohort-pgtest, created when
# missing.
#
#   scripts/pg_server.sh start DIR [SETTING=VALUE ...]   prints the libpq connection string
#     (listen_addresses=ADDRESS to be reached over TCP; PG_HBA_EXTRA: more
#     pg_hba.conf lines, such as "host all all 198.18.0.0/24 trust")
#   scripts/pg_server.sh stop DIR                        stops it at once and removes DIR
set -euo pipefail
bin=/usr/lib/postgresql/15/bin
action=${1:?usage: pg_server.sh start|stop DIR [SETTING=VALUE ...]}
dir=${2:?usage: pg_server.sh start|stop DIR [SETTING=VALUE ...]}
shift 2
as_owner() { if [ "$(id -u)" -eq 0 ]; then runuser -u cohort-pgtest -- "$@"; else "$@"; fi; }

case "$action" in
  start)
    [ -x "$bin/initdb" ] || { echo "pg_server.sh: PostgreSQL 15 is missing; run scripts/install-deps.sh" >&2; exit 1; }
    if [ "$(id -u)" -eq 0 ] && ! id cohort-pgtest >/dev/null 2>&1; then
      useradd --system --no-create-home --shell /usr/sbin/nologin cohort-pgtest
    fi
    mkdir -p "$dir"
    [ "$(id -u)" -eq 0 ] && chown cohort-pgtest "$dir"
    as_owner "$bin/initdb" -D "$dir/data" -U cohort --auth=trust -E UTF8 --no-sync \
      >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    # PG_HBA_EXTRA: more pg_hba.conf lines (a server other hosts reach).
    [ -n "${PG_HBA_EXTRA:-}" ] && echo "$PG_HBA_EXTRA" >>"$dir/data/pg_hba.conf"
    options="-c listen_addresses='' -c unix_socket_directories='$dir'"
    for setting in "$@"; do options+=" -c $setting"; done
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 -o "$options" start \
      >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
    echo "host=$dir dbname=postgres user=cohort"
    ;;
  stop)
    [ -d "$dir/data" ] && as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1
    rm -rf "$dir"
    ;;
  *) echo "pg_server.sh: start or stop, not $action" >&2; exit 2 ;;
esac
