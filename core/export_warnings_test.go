package core

// MaxLooks is how many requests without cause to warn of an untrusted proxy a limit
// looks at.
const MaxLooks = maxLooks
