package main

import (
	"bufio"
	"bytes"
	"path/filepath"
	"strconv"
	"strings"
)

// filesystem says what holds the scratch directory: its type and device,
// and for ext4 whether it keeps a journal. The timings of file creation
// and removal depend on it as much as on wtx.
type filesystem struct {
	Type    string `json:"type"`
	Source  string `json:"source"`
	Journal string `json:"journal,omitempty"` // "yes", "no" or "" (unknown)
}

func (f filesystem) String() string {
	if f.Type == "" {
		return "unknown filesystem"
	}
	s := f.Type
	switch f.Journal {
	case "yes":
		s += " with a journal"
	case "no":
		s += " without a journal"
	}
	if f.Source != "" {
		s += " on " + f.Source
	}
	return s
}

// mountOf returns the type and source of the mount that holds dir (an
// absolute path with symlinks resolved), read from the text of
// /proc/self/mountinfo: the last listed of the longest mount points above
// dir, since a later mount on the same point hides the earlier one.
func mountOf(mountinfo []byte, dir string) (fstype, source string, ok bool) {
	best := -1
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL…] - TYPE SOURCE SUPER
		pre, post, found := strings.Cut(sc.Text(), " - ")
		if !found {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 2 {
			continue
		}
		mp := unescapeMount(f[4])
		if !within(dir, mp) || len(mp) < best {
			continue
		}
		best, fstype, source, ok = len(mp), g[0], unescapeMount(g[1]), true
	}
	return fstype, source, ok
}

// within says whether path is dir or lies under it.
func within(path, dir string) bool {
	if dir == "/" || path == dir {
		return true
	}
	return strings.HasPrefix(path, dir+"/")
}

// unescapeMount undoes the kernel's octal escapes (\040 for a space) in a
// field of mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// devName is the name the kernel gives source's block device under /sys
// ("vda" for /dev/vda), or "" when source is no device path.
func devName(source string) string {
	if !strings.HasPrefix(source, "/dev/") {
		return ""
	}
	return filepath.Base(source)
}
