package stage

// Backends returns the backends of this build, fastest first. "auto" takes
// the first whose Probe succeeds.
func Backends() []Backend { return platformBackends() }
