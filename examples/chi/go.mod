module github.com/reqlimit/reqlimit/examples/chi

go 1.26.0

require github.com/reqlimit/reqlimit v0.1.0

require github.com/go-chi/chi/v5 v5.5.0

require (
	github.com/andybalholm/brotli v1.2.0 // indirect
	github.com/klauspost/compress v1.18.4 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	github.com/valyala/fasthttp v1.69.0 // indirect
)

replace github.com/reqlimit/reqlimit => ../..
