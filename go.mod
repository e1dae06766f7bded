module github.com/reqlimit/reqlimit

go 1.26.8
