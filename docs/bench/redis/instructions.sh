#!/bin/sh
# Instructions the redis-server executes per decision, counted by valgrind's callgrind:
# for each case, a fresh server makes 1 decision and another makes 1+N; the difference over
# N is the cost of one decision, start-up and script loading cancelled out.
#
#   cd docs/bench/redis && ./instructions.sh            # every case, N=2000
#   ./instructions.sh hot100 rr-hot                      # some cases
#
# Needs valgrind and redis-server; the server listens on 127.0.0.1 only.
set -eu
N=${N:-2000}
PORT=${PORT:-6397}
cd "$(dirname "$0")"
go build -o /tmp/reqlimit-instructions ./instructions
cases=${*:-hot100 hot256 bounded multi-exact multi-bounded mixed fresh fresh-bounded many rr-hot rr-fresh rr-many}

count() { # case decisions -> instructions of the whole server run
	out=$(mktemp -d)
	valgrind --tool=callgrind --callgrind-out-file="$out/cg" \
		redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$out" >/dev/null 2>&1 &
	i=0
	until redis-cli -p "$PORT" ping >/dev/null 2>&1; do
		i=$((i + 1)); [ $i -lt 100 ] || { echo "redis-server did not start" >&2; exit 1; }
		sleep 0.2
	done
	/tmp/reqlimit-instructions -addr "127.0.0.1:$PORT" -case "$1" -n "$2" >/tmp/reqlimit-instructions.admitted
	redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
	wait
	callgrind_annotate "$out/cg" | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1; exit }'
	rm -rf "$out"
}

for c in $cases; do
	a=$(count "$c" 1)
	b=$(count "$c" $((N + 1)))
	echo "$c: $(((b - a) / N)) instructions per decision ($(cat /tmp/reqlimit-instructions.admitted))"
done
