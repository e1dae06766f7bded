module github.com/reqlimit/reqlimit/grpclimit

go 1.26.0

require (
	github.com/redis/go-redis/v9 v9.23.0
	github.com/reqlimit/reqlimit v0.1.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260706201446-f0a921348800
	google.golang.org/grpc v1.84.0
	google.golang.org/protobuf v1.36.11
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/net v0.57.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.40.0 // indirect
)

replace github.com/reqlimit/reqlimit => ../
