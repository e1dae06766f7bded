// The tool .ci/consumer.sh serves the checkout's modules with, as a module proxy would.
// A module of its own, outside go.work, so that golang.org/x/mod is never a dependency of
// the library or of the workspace's test run; its path is never imported or fetched.
module modproxy

go 1.26.0

require golang.org/x/mod v0.41.0
