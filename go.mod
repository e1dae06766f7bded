module github.com/reqlimit/reqlimit

go 1.26.8

require golang.org/x/time v0.16.0
