package main

import (
	"os"
	"path/filepath"
	"strings"
)

// scratchFS describes the filesystem that holds dir.
func scratchFS(dir string) filesystem {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return filesystem{}
	}
	fstype, source, ok := mountOf(info, dir)
	if !ok {
		return filesystem{}
	}
	fs := filesystem{Type: fstype, Source: source}
	if name := devName(source); fstype == "ext4" && name != "" {
		// ext4 names the task that commits its journal here, or <none>.
		if task, err := os.ReadFile(filepath.Join("/sys/fs/ext4", name, "journal_task")); err == nil {
			fs.Journal = "yes"
			if strings.TrimSpace(string(task)) == "<none>" {
				fs.Journal = "no"
			}
		}
	}
	return fs
}
