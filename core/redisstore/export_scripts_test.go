package redisstore

// ScriptSources returns each script as sent to Redis, by template name.
func ScriptSources() map[string]string {
	return map[string]string{
		"exact1.lua":   exact1Src,
		"exactn.lua":   exactNSrc,
		"bounded1.lua": bounded1Src,
		"boundedn.lua": boundedNSrc,
		"decide.lua":   decideSrc,
		"release.lua":  releaseSrc,
		"reset.lua":    resetSrc,
	}
}
