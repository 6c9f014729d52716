#!/bin/sh
# Writes PgBouncer's user list from DB_PASSWORD (compose passes the deployer's; none is committed),
# then runs PgBouncer. A " in the password is doubled, as the list's format asks.
set -eu
: "${DB_PASSWORD:?set DB_PASSWORD: the floodgate role's password, the one PostgreSQL has}"
umask 077
quoted=$(printf '%s' "$DB_PASSWORD" | sed 's/"/""/g')
printf '"floodgate" "%s"\n' "$quoted" > "${PGBOUNCER_AUTH_FILE:-/etc/pgbouncer/auth/userlist.txt}"
exec pgbouncer "${1:-/etc/pgbouncer/pgbouncer.ini}"
