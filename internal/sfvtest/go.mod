module github.com/reqlimit/reqlimit/internal/sfvtest

go 1.26.8

require github.com/reqlimit/reqlimit v0.0.0

require github.com/dunglas/httpsfv v1.1.2 // indirect

replace github.com/reqlimit/reqlimit => ../..
