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
# With FUNCS=dir, it also writes dir/<app>.tsv: instructions per request by function, the
# module path left out, so that the files of two checkouts can be joined to see where a
# difference lies.
#
# Needs valgrind.
set -eu
export LC_ALL=C # sort and join must agree on the order
N=${N:-20000}
pkg=${1:?usage: instructions.sh ./<adapter> [app...]}
shift
apps=${*:-bare headers-off standard}
bin=$(mktemp)
out=$(mktemp -d)
trap 'rm -rf "$bin" "$out"' EXIT
go test -c -o "$bin" "$pkg"

count() { # app requests -> instructions of the whole run; cachegrind's file in $out/$2
	GOMAXPROCS=1 GOGC=off valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$out/$2" \
		"$bin" -test.run '^$' -test.bench "Middleware/$1\$/^\$" -test.benchtime "${2}x" 2>&1 |
		awk '/I *refs/ { gsub(",", "", $NF); print $NF }'
}

functions() { # cachegrind file -> "function<TAB>instructions", sorted by function
	cg_annotate --show-percs=no --threshold=0.001 --auto=no "$1" | awk '
		/file:function/ { on = 1; next }
		on && /^ *[0-9][0-9,]* / {
			n = $1; gsub(",", "", n); $1 = ""
			f = $0; sub(/^ +[^:]*\.(go|s|c):/, "", f); gsub(/github\.com\/reqlimit\/reqlimit\//, "", f)
			sum[f] += n
		}
		END { for (f in sum) print f "\t" sum[f] }' | sort
}

for app in $apps; do
	a=$(count "$app" "$N")
	b=$(count "$app" $((3 * N)))
	echo "$app $(((b - a) / (2 * N))) instructions/request"
	if [ -n "${FUNCS:-}" ]; then
		mkdir -p "$FUNCS"
		functions "$out/$N" >"$out/a"
		functions "$out/$((3 * N))" >"$out/b"
		join -t "$(printf '\t')" -a1 -a2 -e0 -o 0,1.2,2.2 "$out/a" "$out/b" |
			awk -F '\t' -v n=$((2 * N)) '{ d = ($3 - $2) / n; if (d >= 0.5 || d <= -0.5) printf "%s\t%.1f\n", $1, d }' >"$FUNCS/$app.tsv"
	fi
done
