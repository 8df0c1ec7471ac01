package main

import "testing"

func TestMountOf(t *testing.T) {
	info := []byte(`22 1 252:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 22 0:26 / /tmp rw,nosuid shared:5 - tmpfs tmpfs rw
31 22 7:0 / /mnt/with\040space rw - ext4 /dev/loop0 rw
32 30 0:27 / /tmp rw - tmpfs other rw
40 22 0:30 / /tmpx rw - xfs /dev/sdb rw
garbage line
`)
	cases := []struct{ dir, fstype, source string }{
		{"/", "ext4", "/dev/vda"},
		{"/home/u/work", "ext4", "/dev/vda"},
		{"/tmp", "tmpfs", "other"},             // the later mount on the same point hides the earlier
		{"/tmp/wtx-bench-1", "tmpfs", "other"}, // below it
		{"/tmpx/a", "xfs", "/dev/sdb"},         // not under /tmp
		{"/mnt/with space/x", "ext4", "/dev/loop0"},
		{"/mnt/with", "ext4", "/dev/vda"},
	}
	for _, c := range cases {
		fstype, source, ok := mountOf(info, c.dir)
		if !ok || fstype != c.fstype || source != c.source {
			t.Errorf("mountOf(%q) = %q, %q, %v; want %q, %q", c.dir, fstype, source, ok, c.fstype, c.source)
		}
	}
	if _, _, ok := mountOf([]byte("junk\n"), "/x"); ok {
		t.Error("mountOf found a mount in text with none")
	}
}

func TestFilesystemString(t *testing.T) {
	for _, c := range []struct {
		fs   filesystem
		want string
	}{
		{filesystem{}, "unknown filesystem"},
		{filesystem{Type: "ext4", Source: "/dev/vda", Journal: "no"}, "ext4 without a journal on /dev/vda"},
		{filesystem{Type: "ext4", Source: "/dev/vda", Journal: "yes"}, "ext4 with a journal on /dev/vda"},
		{filesystem{Type: "tmpfs", Source: "tmpfs"}, "tmpfs on tmpfs"},
	} {
		if got := c.fs.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.fs, got, c.want)
		}
	}
}
