#!/usr/bin/env bash
# Tags a release of the library and of the modules nested in it, consistently. See RELEASING.md.
#
#   .ci/release.sh prepare VERSION   make every module of the repository require the library
#                                    at VERSION (go.mod edits, to commit)
#   .ci/release.sh tag VERSION       check, then tag HEAD VERSION, chilimit/VERSION, grpclimit/VERSION,
#                                    promlimit/VERSION and otellimit/VERSION
#
# It pushes nothing: it prints the git push command.
set -euo pipefail
cd "$(dirname "$0")/.."

library=github.com/reqlimit/reqlimit
# The modules tagged with the library: each takes the tag prefix of its directory.
nested=(chilimit grpclimit promlimit otellimit)

die() {
	echo "release: $*" >&2
	exit 1
}
usage() { die "usage: $0 prepare|tag VERSION (such as v0.1.0)"; }

[ $# -eq 2 ] || usage
cmd=$1 version=$2
# v2 and above would need a /v2 suffix on every module path.
[[ "$version" =~ ^v[01]\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]] ||
	die "version $version: want vMAJOR.MINOR.PATCH with major 0 or 1, such as v0.1.0"

# Every go.mod of the repository but the library's: the nested modules above, and the
# examples, benchmarks and test modules, which are not tagged but build against it too.
modules=()
while IFS= read -r f; do modules+=("$(dirname "$f")"); done < <(git ls-files '*/go.mod' | sort)

# required DIR: the version of the library DIR/go.mod requires, or nothing.
required() {
	go mod edit -json "$1/go.mod" | tr -d ' \t\n' |
		grep -o "\"Path\":\"$library\",\"Version\":\"[^\"]*\"" | sed 's/.*"Version":"\([^"]*\)"/\1/' || true
}

case $cmd in
prepare)
	for m in "${modules[@]}"; do
		if [ -n "$(required "$m")" ]; then
			go mod edit -require="$library@$version" "$m/go.mod"
			echo "$m/go.mod: requires $library $version"
		fi
	done
	echo "now commit the go.mod changes, run .ci/run, then: $0 tag $version"
	;;
tag)
	bad=()
	for m in "${modules[@]}"; do
		got=$(required "$m")
		if [ -n "$got" ] && [ "$got" != "$version" ]; then
			bad+=("$m/go.mod requires $library $got")
		fi
	done
	for m in "${nested[@]}"; do
		[ -f "$m/go.mod" ] || bad+=("$m/go.mod: missing")
		[ -n "$(required "$m")" ] || bad+=("$m/go.mod: does not require $library")
	done
	if [ ${#bad[@]} -gt 0 ]; then
		printf '  %s\n' "${bad[@]}" >&2
		die "tagging $version needs every module to require $library $version: run $0 prepare $version and commit"
	fi
	# A tag names a commit: what is not committed is not released.
	git diff --quiet HEAD -- || die "uncommitted changes; commit or stash them first"

	tags=("$version")
	for m in "${nested[@]}"; do tags+=("$m/$version"); done
	for t in "${tags[@]}"; do
		if git rev-parse -q --verify "refs/tags/$t" >/dev/null; then
			die "tag $t exists already (at $(git rev-parse --short "$t^{commit}"))"
		fi
	done
	head=$(git rev-parse HEAD)
	for t in "${tags[@]}"; do
		git tag -a -m "reqlimit ${t}" "$t" "$head"
		echo "tagged $t at $(git rev-parse --short "$head")"
	done
	echo "nothing is pushed; to publish:"
	echo "  git push origin ${tags[*]}"
	;;
*) usage ;;
esac
