package pathlint

// Allowlist is the reviewed list of path-based calls that stand outside the
// path layer, each with why no untrusted party can steer it. Keep it short:
// a call on a view, an upper or work directory, the workspace or the state
// root belongs in internal/fsx.
var Allowlist = []Allowed{
	{Path: "internal/fsx/", Why: "the path layer itself"},
	{Path: "internal/wtxtest/", Why: "test support: acts on temporary trees a test made"},
	{Path: "internal/stage/stagetest/", Why: "test support: acts on temporary trees a test made"},
	{Path: "bench/", Why: "the benchmark: acts on its own scratch directories"},
	{Path: "internal/failpoint/", Why: "armed only in the wtxfailpoint test build: appends to files a test names"},
}
