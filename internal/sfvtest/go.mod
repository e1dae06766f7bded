module github.com/reqlimit/reqlimit/internal/sfvtest

go 1.26.0

require github.com/reqlimit/reqlimit v0.1.0

require github.com/dunglas/httpsfv v1.1.2

replace github.com/reqlimit/reqlimit => ../..
