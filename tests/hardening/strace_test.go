//go:build linux

package hardening

import (
	"bufio"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// sysCall is one completed system call of an strace -f -tt log.
type sysCall struct {
	start, end int // line numbers of its start and of its completion
	name       string
	args       []string // top-level arguments as printed
	ret        string   // "0", "-1 ENOENT (No such file or directory)", "?"
}

func (c sysCall) ok() bool { return c.ret != "" && c.ret != "?" && !strings.HasPrefix(c.ret, "-") }

// retInt is the return value as a number (-1 when it is not one).
func (c sysCall) retInt() int {
	f := strings.Fields(c.ret)
	if len(f) == 0 {
		return -1
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return -1
	}
	return n
}

func (c sysCall) arg(i int) string {
	if i < len(c.args) {
		return c.args[i]
	}
	return ""
}

func (c sysCall) String() string {
	return fmt.Sprintf("line %d: %s(%s) = %s", c.start, c.name, strings.Join(c.args, ", "), c.ret)
}

var straceLine = regexp.MustCompile(`^(?:(\d+) +)?(\d\d:\d\d:\d\d\.\d+) (.*)$`)

// parseStrace reads an strace log, joining each call that was interrupted
// by another thread's ("<unfinished ...>") with its "resumed" part. Signal
// and exit lines are dropped.
func parseStrace(r io.Reader) ([]sysCall, error) {
	type part struct {
		start int
		text  string
	}
	pending := map[string]part{}
	var calls []sysCall
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	for n := 1; sc.Scan(); n++ {
		m := straceLine.FindStringSubmatch(sc.Text())
		if m == nil {
			return nil, fmt.Errorf("strace log line %d: not a call: %q", n, sc.Text())
		}
		pid, body := m[1], m[3]
		var start int
		var text string
		switch {
		case strings.HasPrefix(body, "---"), strings.HasPrefix(body, "+++"):
			continue
		case strings.HasPrefix(body, "<... "):
			i := strings.Index(body, " resumed>")
			p, ok := pending[pid]
			if i < 0 || !ok {
				return nil, fmt.Errorf("strace log line %d: resumption of nothing: %q", n, body)
			}
			delete(pending, pid)
			start, text = p.start, p.text+body[i+len(" resumed>"):]
		case strings.HasSuffix(body, " <unfinished ...>"):
			pending[pid] = part{n, strings.TrimSuffix(body, " <unfinished ...>")}
			continue
		default:
			start, text = n, body
		}
		c, err := splitCall(text)
		if err != nil {
			return nil, fmt.Errorf("strace log line %d: %w", n, err)
		}
		c.start, c.end = start, n
		calls = append(calls, c)
	}
	return calls, sc.Err()
}

// splitCall splits `name(a, {b, c}, "d,e") = ret` into its parts.
func splitCall(s string) (sysCall, error) {
	open := strings.IndexByte(s, '(')
	if open <= 0 {
		return sysCall{}, fmt.Errorf("no call in %q", s)
	}
	c := sysCall{name: s[:open]}
	depth, quoted, escaped := 0, false, false
	from := open + 1
	for i := open + 1; i < len(s); i++ {
		ch := s[i]
		switch {
		case escaped:
			escaped = false
		case quoted:
			switch ch {
			case '\\':
				escaped = true
			case '"':
				quoted = false
			}
		case ch == '"':
			quoted = true
		case ch == '{' || ch == '[' || ch == '(':
			depth++
		case (ch == '}' || ch == ']') && depth > 0:
			depth--
		case ch == ')' && depth > 0:
			depth--
		case ch == ')':
			if a := strings.TrimSpace(s[from:i]); a != "" || len(c.args) > 0 {
				c.args = append(c.args, a)
			}
			rest := strings.TrimSpace(s[i+1:])
			c.ret = strings.TrimSpace(strings.TrimPrefix(rest, "="))
			return c, nil
		case ch == ',' && depth == 0:
			c.args = append(c.args, strings.TrimSpace(s[from:i]))
			from = i + 1
		}
	}
	return sysCall{}, fmt.Errorf("unterminated call %q", s)
}

// unquote returns the string a path argument holds, or false when the
// argument is not a string (NULL, a pointer).
func unquote(arg string) (string, bool) {
	if len(arg) < 2 || arg[0] != '"' {
		return "", false
	}
	end := strings.LastIndexByte(arg, '"')
	if end <= 0 {
		return "", false
	}
	s := arg[1:end]
	if !strings.Contains(s, `\`) {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'x':
			if i+2 < len(s) {
				if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
					b.WriteByte(byte(v))
					i += 2
					continue
				}
			}
			b.WriteByte('x')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			v, _ := strconv.ParseUint(s[i:j], 8, 8)
			b.WriteByte(byte(v))
			i = j - 1
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), true
}

// pathArgs names, per call, its path arguments as (dirfd index, path
// index) pairs; a dirfd index of -1 means the path is taken from the
// working directory.
var pathArgs = map[string][][2]int{
	"open": {{-1, 0}}, "creat": {{-1, 0}}, "stat": {{-1, 0}}, "lstat": {{-1, 0}}, "access": {{-1, 0}},
	"mkdir": {{-1, 0}}, "rmdir": {{-1, 0}}, "unlink": {{-1, 0}}, "chmod": {{-1, 0}}, "chown": {{-1, 0}},
	"lchown": {{-1, 0}}, "readlink": {{-1, 0}}, "truncate": {{-1, 0}}, "chdir": {{-1, 0}}, "statfs": {{-1, 0}},
	"mknod": {{-1, 0}}, "utimes": {{-1, 0}}, "utime": {{-1, 0}}, "execve": {{-1, 0}},
	"getxattr": {{-1, 0}}, "lgetxattr": {{-1, 0}}, "setxattr": {{-1, 0}}, "lsetxattr": {{-1, 0}},
	"listxattr": {{-1, 0}}, "llistxattr": {{-1, 0}}, "removexattr": {{-1, 0}}, "lremovexattr": {{-1, 0}},
	"rename": {{-1, 0}, {-1, 1}}, "link": {{-1, 0}, {-1, 1}}, "symlink": {{-1, 1}},
	"openat": {{0, 1}}, "openat2": {{0, 1}}, "newfstatat": {{0, 1}}, "fstatat64": {{0, 1}}, "statx": {{0, 1}},
	"faccessat": {{0, 1}}, "faccessat2": {{0, 1}}, "readlinkat": {{0, 1}}, "mkdirat": {{0, 1}},
	"mknodat": {{0, 1}}, "unlinkat": {{0, 1}}, "fchmodat": {{0, 1}}, "fchmodat2": {{0, 1}}, "fchownat": {{0, 1}},
	"utimensat": {{0, 1}}, "futimesat": {{0, 1}}, "name_to_handle_at": {{0, 1}}, "open_tree": {{0, 1}},
	"execveat": {{0, 1}}, "symlinkat": {{1, 2}},
	"renameat": {{0, 1}, {2, 3}}, "renameat2": {{0, 1}, {2, 3}}, "linkat": {{0, 1}, {2, 3}},
}

// mutatingByPath are the calls that change the object their path names
// (open and openat count when they create, truncate or open for writing).
var mutatingByPath = map[string]bool{
	"creat": true, "mkdir": true, "rmdir": true, "unlink": true, "chmod": true, "chown": true, "lchown": true,
	"truncate": true, "mknod": true, "utimes": true, "utime": true, "setxattr": true, "lsetxattr": true,
	"removexattr": true, "lremovexattr": true, "rename": true, "link": true, "symlink": true,
	"mkdirat": true, "mknodat": true, "unlinkat": true, "fchmodat": true, "fchmodat2": true, "fchownat": true,
	"utimensat": true, "futimesat": true, "symlinkat": true, "renameat": true, "renameat2": true, "linkat": true,
}

// writingByFD are the calls that change the file their first argument
// (an fd) refers to; copy_file_range and splice write their third.
var writingByFD = map[string]int{
	"write": 0, "pwrite64": 0, "writev": 0, "pwritev": 0, "pwritev2": 0, "ftruncate": 0, "fallocate": 0,
	"fchmod": 0, "fchown": 0, "fsetxattr": 0, "fremovexattr": 0, "sendfile": 0,
	"copy_file_range": 2, "splice": 2,
}

// fdReturning are the calls that return a new descriptor that is not a
// path of the file tree.
var fdReturning = map[string]bool{
	"socket": true, "eventfd2": true, "epoll_create1": true, "epoll_create": true, "memfd_create": true,
	"signalfd4": true, "timerfd_create": true, "pidfd_open": true, "inotify_init1": true, "accept4": true,
}

// audit is the syscall check of one traced apply. The workspace and the
// state root are absolute, clean paths; cwd is the traced process's
// working directory; sameFS says the two share a filesystem, so that a
// syncfs of either covers both.
type audit struct {
	ws, state, cwd string
	sameFS         bool

	// What the walk found, for the caller to check that it saw anything.
	rootOpens, beneath, temps, wsCalls int
	journal                            string
}

type syncEvent struct {
	path       string
	fs         bool // a syncfs: covers the whole filesystem of path
	start, end int
}

type modEvent struct {
	path string
	line int
}

func (a *audit) in(root, p string) bool { return p == root || strings.HasPrefix(p, root+"/") }

// fsOf names the filesystem holding p, as far as the audit knows.
func (a *audit) fsOf(p string) string {
	switch {
	case a.sameFS && (a.in(a.ws, p) || a.in(a.state, p)):
		return "shared"
	case a.in(a.ws, p):
		return "workspace"
	case a.in(a.state, p):
		return "state"
	}
	return ""
}

// check walks the calls and returns every breach of the three rules:
//
//  1. the journal file is fsync'd (or covered by a syncfs) after its last
//     write and before its rename, its directory is fsync'd after the
//     rename, and every directory made on the way to it has its entry
//     synced, all before the first call that changes the workspace;
//  2. every temporary file created in the workspace is fsync'd, or the
//     workspace's filesystem syncfs'd, between its last write and its
//     rename;
//  3. no call on a workspace path takes an absolute path or a relative one
//     of several components, except the root itself by its absolute path
//     and openat2 with RESOLVE_BENEATH on a descriptor of the root.
//
// The first rule is about changes: an apply reads the workspace (its check
// phase stores pre-images) before it writes the journal, by design.
func (a *audit) check(calls []sysCall) []string {
	var bad []string
	fds := map[int]string{}
	var syncs []syncEvent
	var mods []modEvent
	created := map[string]int{} // workspace temporaries: path -> line made
	type renameEvent struct {
		old, new   string
		start, end int
	}
	var renames []renameEvent
	type mkdirEvent struct {
		path string
		end  int
	}
	var mkdirs []mkdirEvent
	firstMut := -1
	var firstMutCall sysCall
	mutate := func(c sysCall, p string) {
		mods = append(mods, modEvent{p, c.end})
		if a.in(a.ws, p) && firstMut < 0 {
			firstMut, firstMutCall = c.start, c
		}
	}
	resolve := func(c sysCall, dirArg int, p string) (string, bool) {
		if filepath.IsAbs(p) {
			return filepath.Clean(p), true
		}
		base := a.cwd
		if dirArg >= 0 && c.arg(dirArg) != "AT_FDCWD" {
			fd, err := strconv.Atoi(c.arg(dirArg))
			d, ok := fds[fd]
			if err != nil || !ok {
				return "", false
			}
			if d == "" {
				return "", false
			}
			base = d
		}
		return filepath.Join(base, p), true
	}
	fdPath := func(arg string) string {
		fd, err := strconv.Atoi(arg)
		if err != nil {
			return ""
		}
		return fds[fd]
	}
	for _, c := range calls {
		// Rule 3, and where each path argument leads.
		resolved := map[int]string{}
		for _, pa := range pathArgs[c.name] {
			p, isStr := unquote(c.arg(pa[1]))
			if !isStr {
				continue
			}
			full, known := resolve(c, pa[0], p)
			if !known {
				if p != "" {
					bad = append(bad, fmt.Sprintf("path %q on a descriptor the audit does not know: %v", p, c))
				}
				continue
			}
			resolved[pa[1]] = full
			viaWS := pa[0] >= 0 && c.arg(pa[0]) != "AT_FDCWD" && a.in(a.ws, fdPath(c.arg(pa[0])))
			if !a.in(a.ws, full) && !viaWS {
				continue
			}
			a.wsCalls++
			comps := strings.Split(strings.TrimSuffix(p, "/"), "/")
			switch {
			case filepath.IsAbs(p) && filepath.Clean(p) == a.ws:
				if c.name == "openat" || c.name == "open" {
					a.rootOpens++
				}
			case filepath.IsAbs(p):
				bad = append(bad, fmt.Sprintf("absolute workspace path: %v", c))
			case strings.Contains("/"+p+"/", "/../"):
				bad = append(bad, fmt.Sprintf("\"..\" in a workspace path: %v", c))
			case len(comps) > 1 && c.name == "openat2" && fdPath(c.arg(0)) == a.ws && strings.Contains(c.arg(2), "RESOLVE_BENEATH"):
				a.beneath++
			case len(comps) > 1:
				bad = append(bad, fmt.Sprintf("multi-component workspace path: %v", c))
			}
		}
		// Changes.
		switch {
		case c.name == "open" || c.name == "openat" || c.name == "openat2" || c.name == "creat":
			pi := 1
			if c.name == "open" || c.name == "creat" {
				pi = 0
			}
			flags := c.arg(pi + 1)
			p, ok := resolved[pi]
			if !ok {
				break
			}
			writes := c.name == "creat" || strings.Contains(flags, "O_CREAT") || strings.Contains(flags, "O_WRONLY") ||
				strings.Contains(flags, "O_RDWR") || strings.Contains(flags, "O_TRUNC")
			if writes {
				mutate(c, p)
			}
			if c.ok() {
				fds[c.retInt()] = p
				if strings.Contains(flags, "O_CREAT") && a.in(a.ws, p) && strings.HasPrefix(filepath.Base(p), ".wtx-tmp-") {
					created[p] = c.end
					a.temps++
				}
			}
		case mutatingByPath[c.name]:
			for _, pa := range pathArgs[c.name] {
				if p, ok := resolved[pa[1]]; ok {
					mutate(c, p)
				}
			}
			if !c.ok() {
				break
			}
			switch c.name {
			case "rename", "renameat", "renameat2":
				oi, ni := 1, 3
				if c.name == "rename" {
					oi, ni = 0, 1
				}
				old, new := resolved[oi], resolved[ni]
				renames = append(renames, renameEvent{old, new, c.start, c.end})
				exchange := strings.Contains(c.arg(4), "RENAME_EXCHANGE")
				for fd, p := range fds {
					switch {
					case a.in(old, p):
						fds[fd] = new + strings.TrimPrefix(p, old)
					case exchange && a.in(new, p):
						fds[fd] = old + strings.TrimPrefix(p, new)
					}
				}
			case "mkdir", "mkdirat":
				mkdirs = append(mkdirs, mkdirEvent{resolved[pathArgs[c.name][0][1]], c.end})
			}
		case c.name == "close":
			if fd, err := strconv.Atoi(c.arg(0)); err == nil {
				delete(fds, fd)
			}
		case c.name == "dup" || c.name == "dup2" || c.name == "dup3" ||
			c.name == "fcntl" && strings.HasPrefix(c.arg(1), "F_DUPFD"):
			if c.ok() {
				fds[c.retInt()] = fdPath(c.arg(0))
			}
		case fdReturning[c.name]:
			if c.ok() {
				fds[c.retInt()] = ""
			}
		case c.name == "fsync" || c.name == "fdatasync" || c.name == "syncfs":
			if c.ok() {
				syncs = append(syncs, syncEvent{fdPath(c.arg(0)), c.name == "syncfs", c.start, c.end})
			}
		case c.name == "ioctl" && strings.HasPrefix(c.arg(1), "FICLONE"):
			mutate(c, fdPath(c.arg(0)))
		default:
			if i, ok := writingByFD[c.name]; ok {
				if p := fdPath(c.arg(i)); p != "" {
					mutate(c, p)
				}
			}
		}
	}
	// synced reports whether path was made durable by a sync that began
	// after line from and ended before line to.
	synced := func(path string, from, to int) bool {
		for _, s := range syncs {
			if s.start <= from || s.end >= to {
				continue
			}
			if s.path == path || s.fs && a.fsOf(s.path) != "" && a.fsOf(s.path) == a.fsOf(path) {
				return true
			}
		}
		return false
	}
	lastMod := func(path string, from, before int) int {
		last := from
		for _, m := range mods {
			if m.path == path && m.line > last && m.line < before {
				last = m.line
			}
		}
		return last
	}
	if firstMut < 0 {
		bad = append(bad, "the apply never changed the workspace")
		firstMut = int(^uint(0) >> 1)
	}
	// Rule 1: the journal.
	var jr *renameEvent
	for i := range renames {
		r := &renames[i]
		if filepath.Base(r.new) == "journal" && filepath.Base(filepath.Dir(filepath.Dir(r.new))) == "journal" && a.in(a.state, r.new) {
			jr = r
			break
		}
	}
	if jr == nil {
		bad = append(bad, "no journal was renamed into place")
	} else {
		a.journal = jr.new
		if jr.start > firstMut {
			bad = append(bad, fmt.Sprintf("the journal was renamed into place (line %d) after the workspace changed: %v", jr.start, firstMutCall))
		}
		made := created[jr.old]
		for _, m := range mods {
			if m.path == jr.old && (made == 0 || m.line < made) {
				made = m.line
			}
		}
		if !synced(jr.old, lastMod(jr.old, made, jr.start), jr.start) {
			bad = append(bad, fmt.Sprintf("the journal %s was renamed (line %d) without an fsync after its last write", jr.old, jr.start))
		}
		dir := filepath.Dir(jr.new)
		if !synced(dir, jr.end, firstMut) {
			bad = append(bad, fmt.Sprintf("the journal's directory %s was not synced between the rename (line %d) and the first workspace change: %v", dir, jr.end, firstMutCall))
		}
		for _, m := range mkdirs {
			if a.in(m.path, dir) && m.end < firstMut && !synced(filepath.Dir(m.path), m.end, firstMut) {
				bad = append(bad, fmt.Sprintf("the new directory %s (line %d) was not made durable in its parent before the first workspace change: %v", m.path, m.end, firstMutCall))
			}
		}
	}
	// Rule 2: workspace temporaries.
	var tmps []string
	for p := range created {
		tmps = append(tmps, p)
	}
	sort.Strings(tmps)
	for _, p := range tmps {
		for _, r := range renames {
			if r.old != p || r.start < created[p] {
				continue
			}
			if !synced(p, lastMod(p, created[p], r.start), r.start) {
				bad = append(bad, fmt.Sprintf("temporary %s renamed to %s (line %d) without a sync after its last write", p, r.new, r.start))
			}
			break
		}
	}
	return bad
}
