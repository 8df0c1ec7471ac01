package wtx

import (
	"bufio"
	"strings"
	"testing"
)

func TestStageOfMountinfo(t *testing.T) {
	const tx = "tx-20261201T141815Z-6448ee8b"
	info := `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
68 46 0:40 / /tmp/s\040p,a=c\134e/st/stages/` + tx + `/merged rw,relatime - overlay overlay rw,lowerdir=/w\040s,upperdir=/tmp/s\040p\134\054a=c\134\134e/st/stages/` + tx + `/upper,workdir=/x,uuid=on
69 46 0:40 / /w\040s rw,relatime - overlay overlay rw,lowerdir=/w\040s,upperdir=/tmp/s\040p\134\054a=c\134\134e/st/stages/` + tx + `/upper,workdir=/x,uuid=on
70 69 8:1 /tmp/s\040p,a=c\134e/st/stages/` + tx + `/excluded/0 /w\040s/build rw - ext4 /dev/sda1 rw
71 1 0:41 / /other rw - overlay overlay rw,lowerdir=/l,upperdir=/var/lib/docker/u,workdir=/w
`
	state := `/tmp/s p,a=c\e/st`
	for _, c := range []struct {
		path, state, want string
	}{
		{"/w s", state, tx},
		{"/w s/sub/dir", state, tx},
		{"/w s/build", state, tx},
		{"/w", state, ""},
		{"/other", state, ""},
		{"/elsewhere", state, ""},
		{"/w s", "/another/state", tx}, // stages/<tx>/upper of another state root
	} {
		got := stageOfMountinfo(bufio.NewScanner(strings.NewReader(info)), c.path, c.state)
		if got != c.want {
			t.Errorf("stageOfMountinfo(%q, %q) = %q, want %q", c.path, c.state, got, c.want)
		}
	}
}
