#!/usr/bin/env bash
# A user's first steps with a release, before it is tagged: a module outside the repository
# gets the library and its nested modules at the version they require of each other (the
# one RELEASING.md tags next), from zips of this checkout served by a file-based module
# proxy; nothing is replaced. Its go.mod starts at the go version the library claims to
# need, and must end there: a dependency needing more would raise it. Then it builds and
# runs a Gin app and a promlimit app. Every other module comes from the proxy the machine
# already uses (go env GOPROXY), through the local module cache first.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# The version the nested modules require of the library: what a tag would publish.
version=$(cd promlimit && GOWORK=off go list -m -f '{{.Version}}' github.com/reqlimit/reqlimit)
goversion=$(GOWORK=off go list -m -f '{{.GoVersion}}' github.com/reqlimit/reqlimit)
# The library and the modules nested in it that are tagged with it, as paths in the repository.
released=(. chilimit grpclimit promlimit otellimit)
modpath() { if [ "$1" = . ]; then echo github.com/reqlimit/reqlimit; else echo "github.com/reqlimit/reqlimit/$1"; fi; }

tmp=$(mktemp -d)
# The module cache marks what it extracts read-only.
trap 'GOMODCACHE="$tmp/modcache" go clean -modcache >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

dirs=()
for m in "${released[@]}"; do if [ "$m" = . ]; then dirs+=("$root"); else dirs+=("$root/$m"); fi; done
(cd .ci/modproxy && GOWORK=off go run . -version "$version" -out "$tmp/proxy" "${dirs[@]}")

# The user's machine, but with a module cache of its own: the shared one may hold an
# earlier snapshot served at the same version, which the go command would reuse. The
# shared cache's downloads are served as a proxy too, so that only modules it lacks are
# fetched. The checksum database does not know the checkout's modules.
cache=$(go env GOMODCACHE)/cache/download
export GOWORK=off GOTOOLCHAIN=local GOMODCACHE="$tmp/modcache"
export GOPROXY="file://$tmp/proxy,file://$cache,$(go env GOPROXY)"
export GONOSUMDB="github.com/reqlimit/reqlimit${GONOSUMDB:+,$GONOSUMDB}"

app=$tmp/app
mkdir -p "$app/gin" "$app/prom"
cd "$app"
cat >go.mod <<MOD
module example.com/consumer

go $goversion
MOD

cat >gin/main.go <<'GO'
// A Gin app limited as the README shows: three requests a minute per client.
package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/reqlimit/reqlimit/ginlimit"
)

func main() {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.GET("/user/test", ginlimit.Limit(3, time.Minute), func(c *gin.Context) { c.String(http.StatusOK, "hello\n") })
	srv := httptest.NewServer(r)
	defer srv.Close()

	var got []string
	for range 4 {
		resp, err := http.Get(srv.URL + "/user/test")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		got = append(got, fmt.Sprintf("%d %s", resp.StatusCode, resp.Header.Get("RateLimit")))
	}
	fmt.Println(strings.Join(got, "\n"))
	want := []string{`200 "3/1m";r=2;t=60`, `200 "3/1m";r=1;t=60`, `200 "3/1m";r=0;t=60`, `429 "3/1m";r=0;t=60`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		fmt.Fprintf(os.Stderr, "want:\n%s\n", strings.Join(want, "\n"))
		os.Exit(1)
	}
}
GO

cat >prom/main.go <<'GO'
// A net/http app whose limit feeds Prometheus through promlimit.
package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/reqlimit/reqlimit/nethttp"
	"github.com/reqlimit/reqlimit/promlimit"
)

func main() {
	reg := prometheus.NewRegistry()
	m := promlimit.New(reg)
	mux := http.NewServeMux()
	mux.Handle("GET /user/{id}", nethttp.Limit(3, time.Minute, m.Option())(http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	body := func(path string) string {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return string(b)
	}
	body("/user/1")
	want := `reqlimit_requests_total{outcome="admitted",policy="3/1m",scope="GET /user/{id}"} 1`
	metrics := body("/metrics")
	if !strings.Contains(metrics, want) {
		fmt.Fprintf(os.Stderr, "/metrics lacks %s:\n%s", want, metrics)
		os.Exit(1)
	}
	fmt.Println(want)
}
GO

# As the README's Install section has a user do it.
get=()
for m in "${released[@]}"; do get+=("$(modpath "$m")@$version"); done
go get "${get[@]}"
go mod tidy
if [ "$(go list -m -f '{{.GoVersion}}')" != "$goversion" ]; then
	echo "consumer: getting the modules raised the go version of a module at go $goversion:"
	cat go.mod
	exit 1
fi
for m in "${released[@]}"; do
	# tidy drops what no package imports; each released module must still resolve from the proxy.
	go mod download -json "$(modpath "$m")@$version" | grep -q '"Zip"'
done
# Neither replaced nor taken from the checkout: from the proxy's zips.
go list -m -f '{{.Path}} {{.Version}} {{if .Replace}}REPLACED{{end}}{{.Dir}}' github.com/reqlimit/reqlimit github.com/reqlimit/reqlimit/promlimit |
	while read -r path v dir; do
		case "$dir" in
		"$GOMODCACHE"/*) echo "consumer: $path $v from $dir" ;;
		*) echo "consumer: $path $v is not from the module proxy: $dir"; exit 1 ;;
		esac
	done
# -trimpath: the build cache then holds the dependencies whatever the module cache's path.
go build -trimpath -o "$tmp/bin/" ./...
"$tmp/bin/gin"
"$tmp/bin/prom"
echo "consumer: ok"
