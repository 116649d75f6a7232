#!/usr/bin/env bash
# Runs settle, DBOS Transact Go on PostgreSQL and the Temporal dev server on
# the same one-step workload, in one run, and prints a table with ratios
# (make bench-peers). Starts and stops its own PostgreSQL cluster (Debian's
# postgresql, installed with apt when missing: run as root) and Temporal
# dev server (the temporal CLI built from the Go module proxy, kept in
# $SETTLE_PEERS_CACHE), both in a temporary directory.
#
# PEERS_SECONDS (default 8) and PEERS_CONC (default 1,64,256) are passed on.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
temporal_version=v1.5.1 # v1.9.1's nested cliext module is not on the proxy
cache="${SETTLE_PEERS_CACHE:-$HOME/.cache/settle-peers}"
work="$(mktemp -d /tmp/settle-peers.XXXXXX)"
pgbin=""
temporal_pid=""

cleanup() {
	if [ -n "$temporal_pid" ]; then kill "$temporal_pid" 2>/dev/null || true; wait "$temporal_pid" 2>/dev/null || true; fi
	if [ -n "$pgbin" ] && [ -f "$work/pg/postmaster.pid" ]; then
		runuser -u postgres -- "$pgbin/pg_ctl" -D "$work/pg" -m fast -w stop >/dev/null 2>&1 || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

# free_port prints a loopback TCP port nothing listens on.
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 30000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
	done
}

# --- PostgreSQL ---------------------------------------------------------------
find_pg() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }
pgbin="$(find_pg)"
if [ -z "$pgbin" ]; then
	echo "bench-peers: installing PostgreSQL (Debian package postgresql)" >&2
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
	pgbin="$(find_pg)"
fi
id postgres >/dev/null 2>&1 || useradd --system --home "$work" postgres
chmod 755 "$work"
mkdir -p "$work/pg" "$work/pgsock"
chown postgres "$work/pg" "$work/pgsock"
runuser -u postgres -- "$pgbin/initdb" -D "$work/pg" -A trust -U postgres >"$work/initdb.log" 2>&1
pgport="$(free_port)"
# Durability equal to settle's fsync always: every commit is fsynced.
runuser -u postgres -- "$pgbin/pg_ctl" -D "$work/pg" -l "$work/pgsock/pg.log" -w \
	-o "-p $pgport -k $work/pgsock -c listen_addresses=127.0.0.1 -c fsync=on -c synchronous_commit=on -c full_page_writes=on -c max_connections=300" \
	start >/dev/null
echo "bench-peers: PostgreSQL $("$pgbin/postgres" --version | awk '{print $3}') on 127.0.0.1:$pgport" >&2

# --- Temporal dev server --------------------------------------------------------
temporal="$cache/temporal-$temporal_version"
if [ ! -x "$temporal" ]; then
	echo "bench-peers: building the temporal CLI $temporal_version from the Go module proxy (a few minutes)" >&2
	mkdir -p "$cache"
	GOBIN="$cache/bin" go install "github.com/temporalio/cli/cmd/temporal@$temporal_version"
	mv "$cache/bin/temporal" "$temporal"
fi
tport="$(free_port)"
"$temporal" server start-dev --headless --ip 127.0.0.1 --port "$tport" --db-filename "$work/temporal.db" \
	--sqlite-pragma journal_mode=wal --sqlite-pragma synchronous=FULL --log-level error >"$work/temporal.log" 2>&1 &
temporal_pid=$!
for _ in $(seq 1 120); do
	if (exec 3<>"/dev/tcp/127.0.0.1/$tport") 2>/dev/null; then break; fi
	sleep 0.5
done
"$temporal" operator namespace describe --address "127.0.0.1:$tport" default >/dev/null 2>&1 || sleep 2
echo "bench-peers: Temporal dev server ($("$temporal" --version | head -1)) on 127.0.0.1:$tport" >&2

# --- the run ----------------------------------------------------------------------
cd "$here"
PEERS_PG_URL="postgres://postgres@127.0.0.1:$pgport/postgres?sslmode=disable" PEERS_TEMPORAL="127.0.0.1:$tport" \
	go test -run '^$' -bench '^BenchmarkPeers$' -benchtime 1x -timeout 30m .
