package core

// LocalLooks is how many requests from local peers without a forwarded header a limit
// looks at for one.
const LocalLooks = localLooks
