#!/bin/sh
# review.sh renders docs/screenshots/review.png: it builds wtx, makes a demo
# workspace with a staged change, runs 'wtx review' in a detached tmux
# session, captures the pane with its colours and draws it with ImageMagick.
#
# Needs: go, tmux, python3, ImageMagick (convert) and the DejaVu Sans Mono
# font (Debian: apt-get install tmux python3 imagemagick fonts-dejavu-core).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# $CONVERT names ImageMagick's convert when the one on PATH is not it.
convert=${CONVERT:-convert}
for tool in go tmux python3 "$convert"; do
	command -v "$tool" >/dev/null || { echo "review.sh: needs $tool" >&2; exit 1; }
done
font=/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf
[ -f "$font" ] || { echo "review.sh: needs $font (fonts-dejavu-core)" >&2; exit 1; }

tmp=$(mktemp -d)
sock="$tmp/tmux.sock"
trap 'tmux -S "$sock" kill-server 2>/dev/null || true; rm -rf "$tmp"' EXIT
(cd "$repo" && go build -o "$tmp/bin/wtx" ./cmd/wtx)
export PATH="$tmp/bin:$PATH" WTX_STATE_DIR="$tmp/state" HOME="$tmp/home"
mkdir -p "$tmp/home" "$tmp/demo/src" "$tmp/demo/scripts"
cd "$tmp/demo"
cat > src/greet.go <<'GO'
package main

import "fmt"

func greet(name string) string {
	return "hello " + name
}

func main() {
	fmt.Println(greet("world"))
}
GO
printf '#!/bin/sh\ngo build ./...\n' > scripts/build.sh
printf 'temporary notes\n' > NOTES.old
ln -s src/greet.go entry
wtx run --name demo -- sh -c '
	sed -i "s/\"hello \" + name/fmt.Sprintf(\"Hello, %s!\", name)/" src/greet.go
	chmod +x scripts/build.sh
	rm NOTES.old
	printf "# demo\n\nRun scripts/build.sh.\n" > README.md
	ln -sfn src/main.go entry' 2>/dev/null

tmux -S "$sock" new-session -d -x 100 -y 28 -s shot "TERM=xterm-256color wtx review demo"
for i in $(seq 100); do
	tmux -S "$sock" capture-pane -p -t shot | grep -q 'selected' && break
	sleep 0.1
done
tmux -S "$sock" send-keys -t shot j
sleep 0.5
tmux -S "$sock" capture-pane -e -p -t shot > "$tmp/pane.ansi"

python3 - "$tmp/pane.ansi" "$tmp/draw.mvg" <<'PY'
import re, sys
palette = {30: "#4d4d4d", 31: "#f2777a", 32: "#99cc99", 33: "#ffcc66", 34: "#6699cc",
           35: "#cc99cc", 36: "#66cccc", 37: "#d3d0c8"}
fg0, bg0 = "#d3d0c8", "#2d2d2d"
cw, ch, pad = 8.4, 17, 10
out = ["font-size 14"]
# tmux repeats no attribute a line inherits from the one before.
fg, bold, rev, faint = fg0, False, False, False
for y, line in enumerate(open(sys.argv[1], encoding="utf-8").read().split("\n")):
    x = 0
    for part in re.split(r"(\x1b\[[0-9;:]*m)", line):
        if part.startswith("\x1b["):
            codes = [c for c in re.split("[;:]", part[2:-1]) if c] or ["0"]
            i = 0
            while i < len(codes):
                c = int(codes[i])
                if c == 0: fg, bold, rev, faint = fg0, False, False, False
                elif c == 1: bold = True
                elif c == 2: faint = True
                elif c == 7: rev = True
                elif c in (22,): bold = faint = False
                elif c == 27: rev = False
                elif c == 39: fg = fg0
                elif c in palette: fg = palette[c]
                elif 90 <= c <= 97: fg = palette[c - 60]
                elif c == 38 and i + 2 < len(codes) and codes[i+1] == "5":
                    n = int(codes[i+2]); fg = palette.get(30 + n % 8, fg0); i += 2
                i += 1
            continue
        for chr_ in part:
            px, py = pad + x * cw, pad + y * ch
            color = fg if not faint else "#747369"
            if rev:
                out.append(f"fill '{fg}' rectangle {px},{py} {px+cw},{py+ch}")
                color = bg0
            if chr_ != " ":
                esc = chr_.replace("\\", "\\\\").replace("'", "\\'")
                weight = "font-weight bold " if bold else "font-weight normal "
                out.append(f"{weight}fill '{color}' text {px},{py+13} '{esc}'")
            x += 1
open(sys.argv[2], "w", encoding="utf-8").write("\n".join(out) + "\n")
PY
"$convert" -size 860x496 xc:'#2d2d2d' -font "$font" -draw "$(cat "$tmp/draw.mvg")" "$here/review.png"
echo "wrote $here/review.png"
