#!/bin/sh
# Entry point of the postgres stand-in (postgres.Containerfile): initialises the cluster on
# first start from POSTGRES_USER, POSTGRES_PASSWORD and POSTGRES_DB, then runs the server
# as the postgres user in the foreground (SIGINT, the image's stop signal, is a fast stop).
set -eu
: "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
mkdir -p "$PGDATA" /run/postgresql
chown postgres:postgres "$PGDATA" /run/postgresql
chmod 700 "$PGDATA"
as_pg() { runuser -u postgres -- "$@"; }
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pw=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" >"$pw"
    chown postgres "$pw"
    as_pg initdb -D "$PGDATA" -U "$user" --pwfile="$pw" -E UTF8 --locale=C.UTF-8 \
        --auth-local=trust --auth-host=scram-sha-256 >/dev/null
    rm -f "$pw"
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    as_pg pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    [ "$db" = postgres ] || as_pg createdb -U "$user" "$db"
    as_pg pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups postgres -D "$PGDATA" -c listen_addresses='*'
