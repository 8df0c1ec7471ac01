package stage

import (
	"reflect"
	"testing"
)

// TestParseMountsKeepsBytes checks that a mount's root and mount point
// keep every byte: the kernel escapes a space, tab, newline and backslash
// in octal and leaves the rest (a no-break space, bytes that are not
// UTF-8), which must not split a field.
func TestParseMountsKeepsBytes(t *testing.T) {
	raw := "26 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n" +
		"132 26 254:0 /tmp/w\u00a0s\\012x\xff /mnt/a\\040b rw,relatime shared:1 - ext4 /dev/vda rw\n" +
		"140 26 0:52 / /mnt/o rw - overlay overlay rw,lowerdir=/l,upperdir=/u\\054p\\040q,workdir=/w\n"
	got := parseMounts(raw)
	want := []mountEntry{{id: 26, dev: "254:0", root: "/", point: "/"},
		{id: 132, dev: "254:0", root: "/tmp/w\u00a0s\nx\xff", point: "/mnt/a b"},
		{id: 140, dev: "0:52", root: "/", point: "/mnt/o", upper: "/u,p q"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseMounts = %+v, want %+v", got, want)
	}
}
