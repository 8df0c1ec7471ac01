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

	// The program's edge: paths a person names.
	{Path: "cmd/wtx/main.go", Func: "main", Calls: []string{"os.Create"}, Why: "profile files the person names in the environment"},
	{Path: "internal/cli/exchangecmds.go", Func: "exportToFile", Why: "the bundle file the person names on the command line, written beside itself and renamed into place"},
	{Path: "internal/cli/exchangecmds.go", Func: "newImportCommand", Calls: []string{"os.Open"}, Why: "the bundle file the person names, only read"},
	{Path: "internal/cli/flowcmds.go", Func: "newFlowRunCommand", Calls: []string{"os.ReadFile"}, Why: "the flow file the person names, only read"},
	{Path: "internal/cli/gendocs.go", Func: "genDocs", Why: "the documentation directory the person names (wtx gen-docs)"},
	{Path: "internal/cli/receiptkey.go", Func: "verifyReceiptDoc", Calls: []string{"os.ReadFile"}, Why: "the public key file the person names with --key, only read"},
	{Path: "internal/cli/receiptkey.go", Func: "readReceiptDoc", Calls: []string{"os.Open"}, Why: "the receipt file the person names, only read"},
	{Path: "internal/cli/receipttrustcmd.go", Func: "trustKeyInput", Calls: []string{"os.Open"}, Why: "the public key file the person names, only read"},
	{Path: "internal/cli/review.go", Func: "reviewModel.edit", Why: "a private temporary directory wtx makes for the person's editor"},
	{Path: "internal/cli/review.go", Func: "reviewModel.runEditor", Why: "the private temporary directory reviewModel.edit made"},
	{Path: "internal/cli/trustcmd.go", Func: "readSafeDirs", Calls: []string{"os.OpenFile"}, Why: "the person's own safe-directory file, opened without blocking and checked on the open file to be regular and theirs (or root's)"},
	{Path: "internal/cli/trustcmd.go", Func: "globals.editSafeDirs", Calls: []string{"os.MkdirAll"}, Why: "the person's own configuration directory"},
	{Path: "stateroot.go", Func: "makeStateRoot", Why: "creates the state root itself, at the path the person's environment names; it is checked and then reached through one handle"},
	{Path: "trust.go", Func: "editTrust", Calls: []string{"os.Open"}, Why: "opens the state root itself to lock it; the trust file is reached beneath its handle"},
	{Path: "project.go", Func: "loadProject", Calls: []string{"os.OpenFile"}, Why: "the workspace's project file, opened O_NOFOLLOW|O_NONBLOCK and checked (regular, owner trusted) on the open file (T-004); the workspace is the person's, never a view"},

	// The kernel's own files.
	{Path: "inside_linux.go", Func: "stageOfMount", Calls: []string{"os.Open"}, Why: "/proc/self/mountinfo"},
	{Path: "inside_linux.go", Func: "stageOfAncestor", Calls: []string{"os.ReadFile"}, Why: "/proc/<pid>/ files of wtx's own ancestors, only read"},
	{Path: "internal/stage/confine_linux.go", Func: "identityMap", Calls: []string{"os.ReadFile"}, Why: "/proc/self/{uid,gid}_map"},
	{Path: "internal/stage/confine_linux.go", Func: "lastCap", Calls: []string{"os.ReadFile"}, Why: "/proc/sys/kernel/cap_last_cap"},
	{Path: "internal/stage/confine_linux.go", Func: "verifyCaps", Calls: []string{"os.ReadFile"}, Why: "/proc/self/status"},
	{Path: "internal/stage/confine_linux.go", Func: "limitUserNamespaces", Why: "/proc/sys/user/max_user_namespaces inside the command's own user namespace"},
	{Path: "internal/stage/confine_ws_linux.go", Func: "readMounts", Calls: []string{"os.ReadFile"}, Why: "/proc/self/mountinfo"},
	{Path: "internal/stage/contain_linux.go", Why: "/proc/<pid>/ files of the command's processes, only read"},
	{Path: "internal/stage/idmap_linux.go", Why: "/etc/group and /proc/<pid>/ files, only read"},
	{Path: "internal/stage/kernelfs_linux.go", Why: "/proc and /sys mounted read-only in the command's private mount namespace before the command starts; /proc/self/mountinfo read"},
	{Path: "internal/stage/probecache.go", Func: "bootID", Calls: []string{"os.ReadFile"}, Why: "/proc/sys/kernel/random/boot_id"},
	{Path: "internal/stage/supervise_linux.go", Func: "descendants", Why: "/proc/<pid>/task/*/children of the command, only read"},
	{Path: "internal/stage/supervise_linux.go", Func: "markInheritedCloexec", Calls: []string{"os.Open"}, Why: "/proc/self/fd"},
	{Path: "internal/stage/supervise_linux.go", Func: "readProcStat", Calls: []string{"os.ReadFile"}, Why: "/proc/<pid>/stat of a process of the command's namespace, only read"},

	// Inside the command's own namespace, as the command: it could make
	// the same call itself.
	{Path: "internal/stage/supervise_linux.go", Func: "execMain", Calls: []string{"os.Chdir"}, Why: "the command's working directory, entered as the command in its own namespace; it grants nothing the command could not do itself"},
	{Path: "internal/stage/supervise_linux.go", Func: "supervise", Calls: []string{"unix.Mount"}, Why: "makes the command's private mount namespace private (MS_PRIVATE on /)"},
	{Path: "internal/stage/isolate_linux.go", Func: "enterIsolated", Calls: []string{"unix.Mount"}, Why: "makes a fresh private mount namespace private (MS_PRIVATE on /)"},

	// wtx's own directories beneath the state root (private to its owner,
	// checked so before use), which no command has run in yet or which the
	// command cannot reach (the state root is hidden from it).
	{Path: "flow/run.go", Func: "runner.lockFlowRun", Why: "the flow run's lock file in the workspace's state directory, hidden from commands"},
	{Path: "flow/run.go", Func: "runner.flowRunLive", Calls: []string{"os.Open"}, Why: "the flow run's lock file, only read"},
	{Path: "fsck.go", Why: "wtx fsck walks the state root it checked private first, never following a link (WalkDir, Lstat before chmod), and sets damage aside within it; commands never see the state root"},
	{Path: "internal/stage/confine_linux.go", Func: "hideState", Why: "binds the state root read-only over itself in the command's namespace before it starts, then the copy view writable again from a descriptor"},
	{Path: "internal/stage/confine_linux.go", Func: "hideKeys", Why: "mounts over the receipt key directory in the command's namespace before it starts, opened O_PATH|O_NOFOLLOW"},
	{Path: "internal/stage/confine_ws_linux.go", Func: "openNoFollow", Calls: []string{"unix.Open"}, Why: "the fallback of openat2 RESOLVE_NO_SYMLINKS before Linux 5.6, O_NOFOLLOW"},
	{Path: "internal/stage/viewstdio_linux.go", Func: "reopenInView", Calls: []string{"unix.Open"}, Why: "the fallback of openat2 RESOLVE_NO_SYMLINKS before Linux 5.6, O_NOFOLLOW: a standard descriptor's own path opened again in the command's namespace, in the view"},
	{Path: "internal/stage/confine_ws_linux.go", Func: "coverAliasesOf", Calls: []string{"unix.Open"}, Why: "the workspace or state root (person-given) opened O_PATH to find its mounts, before the command starts"},
	{Path: "internal/stage/confine_ws_linux.go", Func: "readOnlyAlias", Calls: []string{"unix.Mount"}, Why: "remounts another mount of the workspace read-only in the command's namespace before it starts, by a /proc/self/fd path of an O_PATH descriptor"},
	{Path: "internal/stage/confine_ws_linux.go", Func: "bindCopyView", Calls: []string{"unix.Mount"}, Why: "binds the copy view over the workspace path in the command's namespace before it starts, by /proc/self/fd paths of descriptors opened without following links"},
	{Path: "internal/stage/viewsetup_linux.go", Func: "bindByProc", Calls: []string{"unix.Mount"}, Why: "a bind between two descriptors opened without following links, named by /proc/self/fd (kernels without move_mount)"},
	{Path: "internal/stage/viewsetup_linux.go", Func: "parent", Calls: []string{"unix.Open"}, Why: "the negative control of view-links (WTX_DISABLE=view-links) only"},
	{Path: "internal/stage/nsexec_linux.go", Func: "enterView", Why: "mounts and enters the stage's view in the command's namespace before the command starts; the paths are the stage directory's, beneath the state root"},
	{Path: "internal/stage/nsexec_linux.go", Func: "mountOverlay", Calls: []string{"unix.Mount"}, Why: "mounts the overlay over the workspace (lower) and the stage's upper and work directories beneath the state root, before the command starts"},
	{Path: "internal/stage/nsexec_linux.go", Func: "remountReadOnly", Calls: []string{"unix.Mount"}, Why: "remounts the view read-only before the command starts"},
	{Path: "internal/stage/nsexec_linux.go", Func: "lockUpper", Calls: []string{"unix.Open"}, Why: "opens the stage's upper directory beneath the state root to lock it (O_DIRECTORY|O_NOFOLLOW)"},
	{Path: "internal/stage/overlay_linux.go", Func: "Overlay.Open", Calls: []string{"os.Mkdir"}, Why: "makes a new stage's upper and work directories in its fresh private stage directory"},
	{Path: "internal/stage/overlay_linux.go", Func: "attachOverlay", Calls: []string{"os.ReadFile"}, Why: "reads the stage directory's own record beneath the state root"},
	{Path: "internal/stage/overlay_linux.go", Func: "likeWorkspaceRoot", Why: "gives the upper directory itself (made by wtx, in the stage directory) the workspace root's owner and bits; Lchown never follows"},
	{Path: "internal/stage/overlay_probe_linux.go", Why: "a private temporary directory of the probe's own"},
	{Path: "internal/stage/clone.go", Func: "Clone.Probe", Why: "a private temporary directory of the probe's own"},
	{Path: "internal/stage/probecache.go", Func: "ProbeCached", Calls: []string{"os.ReadFile"}, Why: "the probe cache in the state root, only read and decoded"},
	{Path: "internal/stage/digestcache.go", Why: "the digest cache beside the stage's view in its stage directory, hidden from commands; read O_NOFOLLOW, written to a temporary name and renamed"},
	{Path: "internal/stage/viewlock_unix.go", Why: "the view lock: the stage directory itself opened O_DIRECTORY|O_NOFOLLOW"},
	{Path: "internal/stage/volatile_linux.go", Why: "the volatile marks of a stage directory beneath the state root, opened O_NOFOLLOW"},
	{Path: "internal/stage/copy.go", Func: "fenceAfter", Why: "the fence marker in the fresh stage directory"},
	{Path: "internal/stage/copy.go", Func: "openTree", Why: "the first fill of a fresh view beneath the private stage directory: no command has run in it yet, every name is made once by the fill itself"},
	{Path: "internal/stage/copy.go", Func: "copyFile", Why: "a new file (O_EXCL) of the first fill of a fresh view"},
	{Path: "internal/stage/clone.go", Func: "cloneFile", Calls: []string{"os.Chtimes"}, Why: "a new file of the first fill of a fresh view"},
	{Path: "internal/stage/clone_linux.go", Func: "cloneInto", Why: "a new file (O_EXCL) of the first fill of a fresh view"},
	{Path: "internal/stage/clone_darwin.go", Func: "cloneInto", Calls: []string{"os.OpenFile"}, Why: "a new file of the first fill of a fresh view"},
}
