module github.com/reqlimit/reqlimit/chilimit

go 1.26.0

require (
	github.com/go-chi/chi/v5 v5.5.0
	github.com/reqlimit/reqlimit v0.1.0
)

replace github.com/reqlimit/reqlimit => ../
