package wtx

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"github.com/wtx-dev/wtx/internal/stage"
)

// stageOfMount returns the stage whose overlay view is mounted at path or
// at a directory above it: /proc/self/mountinfo lists, for an overlay
// mount, the upper directory it was given, which for a stage's view is its
// upper directory in the state root. It also finds a bind mount of a stage
// directory (a view bound over the workspace's path). "" when path is on no
// such mount, or mountinfo cannot be read.
func stageOfMount(path, stateDir string) string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "" // no /proc: the other checks still hold
	}
	defer f.Close()
	return stageOfMountinfo(bufio.NewScanner(f), path, stateDir)
}

func stageOfMountinfo(sc *bufio.Scanner, path, stateDir string) string {
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m, ok := parseMountinfo(sc.Text())
		if !ok {
			continue
		}
		// A copy or clone view bound over itself: wtx does that only in
		// the mount namespace of a command run in that view, whatever
		// path the command names.
		if loc := stageDirRE.FindStringSubmatch(m.root); loc != nil && m.fstype != "overlay" &&
			strings.HasSuffix(m.point, "/stages/"+loc[2]+"/view") && strings.HasSuffix(m.root, "/stages/"+loc[2]+"/view") {
			return loc[2]
		}
		if !within(path, m.point) {
			continue
		}
		if m.fstype == "overlay" {
			if tx := stageOfUpper(m.opt("upperdir"), stateDir); tx != "" {
				return tx
			}
		}
		// A stage's directory bound over a path (an excluded directory's
		// backing, a view bound over the workspace).
		if loc := stageDirRE.FindStringSubmatch(m.root); loc != nil {
			return loc[2]
		}
	}
	return ""
}

type mountInfo struct {
	root, point, fstype string
	super               []string
}

func (m *mountInfo) opt(name string) string {
	for _, o := range m.super {
		if v, ok := strings.CutPrefix(o, name+"="); ok {
			return unescapeOverlayOpt(unescapeMountinfo(v))
		}
	}
	return ""
}

// parseMountinfo splits one line of /proc/self/mountinfo:
//
//	36 35 98:0 /root /mnt rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// root and mount point are octal-escaped (\040 for a space); the super
// options are split on their unescaped commas.
func parseMountinfo(line string) (mountInfo, bool) {
	fields := strings.Split(line, " ")
	sep := -1
	for i := 6; i < len(fields); i++ {
		if fields[i] == "-" {
			sep = i
			break
		}
	}
	if sep < 0 || sep+1 >= len(fields) {
		return mountInfo{}, false
	}
	m := mountInfo{root: unescapeMountinfo(fields[3]), point: unescapeMountinfo(fields[4]), fstype: fields[sep+1]}
	if sep+3 < len(fields) {
		m.super = strings.Split(fields[sep+3], ",")
	}
	return m, true
}

// unescapeMountinfo undoes the kernel's octal escapes (\ooo).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// unescapeOverlayOpt undoes the backslash escapes with which a layer's path
// is given to overlayfs (\, \: \\).
func unescapeOverlayOpt(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// stageOfAncestor returns the stage of the nearest ancestor process that
// is wtx's stage supervisor (argv[1] is the helper argument): every
// process a command of a stage starts descends from it, also when it
// detached itself (the supervisor is a subreaper), and the command cannot
// change that process's environment, which holds WTX_TX and WTX_WORKSPACE.
// The zero InStage when there is none, or its environment cannot be read
// (the overlay's supervisor holds capabilities, so a command cannot read
// it; its view is found by its mount instead).
func stageOfAncestor() InStage {
	pid := os.Getppid()
	for i := 0; i < 128 && pid > 1; i++ {
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil {
			return InStage{}
		}
		if args := strings.Split(string(cmdline), "\x00"); len(args) > 1 && args[1] == stage.HelperArg {
			env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
			if err != nil {
				return InStage{}
			}
			var in InStage
			for _, kv := range strings.Split(string(env), "\x00") {
				if v, ok := strings.CutPrefix(kv, "WTX_TX="); ok {
					in.Tx = v
				} else if v, ok := strings.CutPrefix(kv, "WTX_WORKSPACE="); ok {
					in.Workspace = v
				}
			}
			return in
		}
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return InStage{}
		}
		// pid (comm) state ppid …: comm may hold spaces and parentheses.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
		f := strings.Fields(rest)
		if len(f) < 2 {
			return InStage{}
		}
		if pid, err = strconv.Atoi(f[1]); err != nil {
			return InStage{}
		}
	}
	return InStage{}
}
