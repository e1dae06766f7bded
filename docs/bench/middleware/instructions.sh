#!/bin/sh
# Instructions per request of an adapter's middleware benchmark apps, counted by valgrind's
# cachegrind: each app's benchmark runs N and 3N requests in one goroutine with the garbage
# collector off, and the difference over 2N is one request's, start-up cancelled out.
#
# Wall-clock ratios of two builds can differ with where the linker places hot code (the
# same bare route, the same instructions, up to a fifth apart); instruction counts do not.
# Use it to compare two builds of the same adapter (run it in each checkout):
#
#   docs/bench/middleware/instructions.sh ./nethttp              # bare, headers-off, standard
#   docs/bench/middleware/instructions.sh ./fiberlimit standard-3per1m
#
# Needs valgrind.
set -eu
N=${N:-20000}
pkg=${1:?usage: instructions.sh ./<adapter> [app...]}
shift
apps=${*:-bare headers-off standard}
bin=$(mktemp)
trap 'rm -f "$bin"' EXIT
go test -c -o "$bin" "$pkg"

count() { # app requests -> instructions of the whole run
	GOMAXPROCS=1 GOGC=off valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
		"$bin" -test.run '^$' -test.bench "Middleware/$1\$/^\$" -test.benchtime "${2}x" 2>&1 |
		awk '/I *refs/ { gsub(",", "", $NF); print $NF }'
}

for app in $apps; do
	a=$(count "$app" "$N")
	b=$(count "$app" $((3 * N)))
	echo "$app $(((b - a) / (2 * N))) instructions/request"
done
