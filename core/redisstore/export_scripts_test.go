package redisstore

// ScriptSources returns each script as sent to Redis, by file name.
func ScriptSources() map[string]string {
	return map[string]string{
		"exact.lua":   exactSrc,
		"bounded.lua": boundedSrc,
		"release.lua": releaseSrc,
		"reset.lua":   resetSrc,
	}
}
