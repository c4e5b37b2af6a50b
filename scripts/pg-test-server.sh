#!/usr/bin/env bash
# A throwaway PostgreSQL server for the test suite, from Debian's postgresql package.
#   eval "$(scripts/pg-test-server.sh start DIR)"   # prints: export FLAGATLAS_TEST_PG_URL=...
#   scripts/pg-test-server.sh stop DIR
# The cluster lives in DIR (initdb), listens on loopback only (and a unix socket in DIR), and
# trusts local connections: it holds nothing but test databases. PostgreSQL refuses to run as
# root, so as root (CI) the server runs as the `postgres` user that the package creates.
set -euo pipefail
cmd=${1:?start|stop}
dir=$(realpath -m "${2:?data directory}")
port=${PGTEST_PORT:-54329}
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$bindir" ] || { echo "no PostgreSQL in /usr/lib/postgresql (apt-get install postgresql)" >&2; exit 1; }

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$cmd" in
  start)
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir"
    if [ ! -f "$dir/PG_VERSION" ]; then
      as_owner "$bindir/initdb" -D "$dir" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
    fi
    as_owner "$bindir/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c synchronous_commit=off" \
      start >/dev/null
    echo "export FLAGATLAS_TEST_PG_URL=postgresql+psycopg://postgres@127.0.0.1:$port/postgres"
    ;;
  stop)
    [ -f "$dir/postmaster.pid" ] && as_owner "$bindir/pg_ctl" -D "$dir" -m fast -w stop >/dev/null
    ;;
  *)
    echo "usage: $0 start|stop DIR" >&2
    exit 2
    ;;
esac
