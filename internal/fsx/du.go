//go:build unix

package fsx

import "golang.org/x/sys/unix"

// DiskUsage sums the bytes of disk allocated to rel and everything beneath
// it (st_blocks, in 512-byte units). It never follows a symlink nor crosses
// a mount point; what it cannot read counts as nothing.
func (r *Root) DiskUsage(rel string) int64 {
	var d *Dir
	var name string
	var err error
	if rel == "." {
		name = "."
		d, err = r.OpenDir(".")
	} else {
		d, name, err = r.parent("stat", rel)
	}
	if err != nil {
		return 0
	}
	defer d.Close()
	return d.usage(name)
}

// usage is DiskUsage of the entry name of d.
func (d *Dir) usage(name string) int64 {
	st, err := lstatAt(d.fd, name)
	if err != nil {
		return 0
	}
	n := int64(st.Blocks) * 512
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return n
	}
	sub := d
	if name != "." {
		if sub, err = d.OpenDir(name); err != nil {
			return n
		}
		defer sub.Close()
	}
	names, err := sub.ReadDir()
	if err != nil {
		return n
	}
	for _, c := range names {
		n += sub.usage(c)
	}
	return n
}
