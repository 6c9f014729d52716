#!/bin/sh
# As the official image starts: the first start makes the cluster (POSTGRES_USER with
# POSTGRES_PASSWORD, the database POSTGRES_DB), every start runs `postgres ARGS` as postgres.
set -eu
if [ "${1:-}" != postgres ]; then
    exec "$@"
fi
shift
data=/var/lib/postgresql/data
as_postgres="setpriv --reuid=postgres --regid=postgres --init-groups"
mkdir -p "$data" /var/run/postgresql
chown postgres:postgres "$data" /var/run/postgresql
chmod 700 "$data"
if [ ! -s "$data/PG_VERSION" ]; then
    : "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
    user=${POSTGRES_USER:-postgres}
    password_file=$(mktemp)
    printf '%s' "$POSTGRES_PASSWORD" > "$password_file"
    chown postgres "$password_file"
    $as_postgres initdb -D "$data" -U "$user" --pwfile="$password_file" -E UTF8 --locale=C.UTF-8 \
        --auth-local=trust --auth-host=scram-sha-256 > /dev/null
    rm "$password_file"
    echo "listen_addresses = '*'" >> "$data/postgresql.conf"
    if [ "${POSTGRES_DB:-$user}" != postgres ]; then
        $as_postgres pg_ctl -D "$data" -o "-c listen_addresses=''" -w start > /dev/null
        $as_postgres psql -v ON_ERROR_STOP=1 -U "$user" -d postgres -q \
            -c "CREATE DATABASE \"${POSTGRES_DB:-$user}\""
        $as_postgres pg_ctl -D "$data" -m fast -w stop > /dev/null
    fi
fi
exec $as_postgres postgres -D "$data" "$@"
