package semantic

import (
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"testing"
)

// bundle layout (internal/bundle): "WTXB" | version | flags |
// deflate(body) | sha256 of everything before it.
const bundleHeader, bundleSum = 6, sha256.Size

// alteration is one way a bundle can be changed in transit.
type alteration struct {
	class string
	data  []byte
}

// inTransit changes one byte of every class of position of a bundle —
// magic, version, flags, compressed body (spread over its length), the
// digest — and cuts it short or appends to it.
func inTransit(b []byte) []alteration {
	var out []alteration
	flip := func(class string, i int) {
		bad := bytes.Clone(b)
		bad[i] ^= 0x01
		out = append(out, alteration{fmt.Sprintf("%s@%d", class, i), bad})
	}
	for i := 0; i < 4; i++ {
		flip("magic", i)
	}
	flip("version", 4)
	flip("flags", 5)
	body := len(b) - bundleHeader - bundleSum
	for k := 0; k < 24; k++ {
		flip("body", bundleHeader+k*body/24)
	}
	flip("body", len(b)-bundleSum-1)
	for _, i := range []int{0, 13, 31} {
		flip("digest", len(b)-bundleSum+i)
	}
	out = append(out, alteration{"cut", b[:len(b)-1]}, alteration{"appended", append(bytes.Clone(b), '\n')},
		alteration{"empty", []byte{}})
	return out
}

// resealed changes one byte of the decompressed body where it holds the
// given text and recomputes the bundle's own digest, as a tool that
// rewrites a bundle would: what the body's inner digests cover (content,
// base digests, receipts) must still be refused.
func resealed(t *testing.T, b []byte, class, text string, digestOf bool) alteration {
	t.Helper()
	body, err := io.ReadAll(flate.NewReader(bytes.NewReader(b[bundleHeader : len(b)-bundleSum])))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(body, []byte(text))
	if i < 0 {
		t.Fatalf("the bundle's body holds no %q", text)
	}
	if digestOf {
		// the first hex digit of the first digest after text, made another
		j := bytes.Index(body[i:], []byte("sha256:"))
		if j < 0 {
			t.Fatalf("no digest after %q", text)
		}
		k := i + j + len("sha256:")
		body[k] = map[bool]byte{true: '1', false: '0'}[body[k] == '0']
	} else {
		body[i+len(text)-1] ^= 0x01
	}
	var out bytes.Buffer
	out.Write(b[:bundleHeader])
	fw, _ := flate.NewWriter(&out, flate.BestCompression)
	fw.Write(body)
	fw.Close()
	sum := sha256.Sum256(out.Bytes())
	out.Write(sum[:])
	return alteration{"resealed " + class, out.Bytes()}
}

// resealedReceipt is resealed for text inside a receipt: receipts travel
// as signed envelopes whose statement is base64, so the alteration is made
// in the decoded statement, re-encoded in place (same length).
func resealedReceipt(t *testing.T, b []byte, class, text string) alteration {
	t.Helper()
	body, err := io.ReadAll(flate.NewReader(bytes.NewReader(b[bundleHeader : len(b)-bundleSum])))
	if err != nil {
		t.Fatal(err)
	}
	done := false
	for off := 0; !done; {
		i := bytes.Index(body[off:], []byte(`"payload":"`))
		if i < 0 {
			break
		}
		start := off + i + len(`"payload":"`)
		end := start + bytes.IndexByte(body[start:], '"')
		payload, err := base64.StdEncoding.DecodeString(string(body[start:end]))
		if err != nil {
			t.Fatalf("a receipt's payload is not base64: %v", err)
		}
		if k := bytes.Index(payload, []byte(text)); k >= 0 {
			payload[k+len(text)-1] ^= 0x01
			copy(body[start:end], base64.StdEncoding.EncodeToString(payload))
			done = true
		}
		off = end
	}
	if !done {
		t.Fatalf("no receipt statement of the bundle holds %q", text)
	}
	var out bytes.Buffer
	out.Write(b[:bundleHeader])
	fw, _ := flate.NewWriter(&out, flate.BestCompression)
	fw.Write(body)
	fw.Close()
	sum := sha256.Sum256(out.Bytes())
	out.Write(sum[:])
	return alteration{"resealed " + class, out.Bytes()}
}

// x002 imports every alteration of a bundle on B and returns those B took.
func x002(t *testing.T, failpoints bool, env []string) (taken []string) {
	a, b, _ := twoMachines(t, failpoints)
	b.env = env
	tx := a.runAgent("fix")
	bundle := []byte(a.ok(nil, "export", tx).stdout)
	// The control: the bundle as written imports.
	if r := b.wtx(bundle, "--json", "import", "-"); r.code != 0 {
		t.Fatalf("the unaltered bundle was refused: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	b.ok(nil, "drop", "--all")
	before, stagesBefore := b.tree(), len(b.stages())

	alts := inTransit(bundle)
	alts = append(alts,
		resealed(t, bundle, "content", "fixed\")", false),            // a file's new content
		resealedReceipt(t, bundle, "receipt", `"kind":"run"`),        // the receipt
		resealed(t, bundle, "odd name", ", changed", false),          // content under a non-UTF-8 name
		resealedReceipt(t, bundle, "exit code", `"exit_code":0`),     // the receipt's command status
		resealedReceipt(t, bundle, "command", `"command":["sh"`),     // the receipt's command
		resealed(t, bundle, "new content", "package new\n", false),   // an added file
		resealed(t, bundle, "base digest", "src/main.go", true),      // the base digest of a modified file
		resealed(t, bundle, "base content", "func main() {}", false), // the original kept for a merge
		resealed(t, bundle, "new digest", "blob.bin", true),          // the digest of an added file
	)
	for _, alt := range alts {
		r := b.wtx(alt.data, "--json", "import", "-")
		if r.code == 0 {
			taken = append(taken, alt.class)
			if failpoints {
				return taken // the control has shown what it must
			}
			continue
		}
		if code := errCode(t, r); !failpoints && (r.code != 1 || code != "io.corrupt") {
			t.Fatalf("%s: import exit %d code %q, want 1 io.corrupt\n%s%s", alt.class, r.code, code, r.stdout, r.stderr)
		}
	}
	if len(taken) == 0 {
		if n := len(b.stages()); n != stagesBefore {
			t.Fatalf("refused imports left %d stages behind", n-stagesBefore)
		}
		if d := diffSnapshots(before, b.tree()); len(d) > 0 {
			t.Fatalf("refused imports changed B:\n%s", formatDiff(d, 20))
		}
	}
	return taken
}

// TestX002_AlteredBundleRefused: a bundle with one byte changed anywhere
// (header, compressed body, digest), cut short, grown, or rewritten with
// its own digest recomputed but its content, base digests or receipts
// changed, is refused on import as io.corrupt, and nothing is made.
func TestX002_AlteredBundleRefused(t *testing.T) {
	t.Parallel()
	if taken := x002(t, false, nil); len(taken) > 0 {
		t.Fatalf("B imported altered bundles: %q", taken)
	}
}

// TestX002_NegativeControl: with the digest checks switched off
// (WTX_DISABLE=bundle-digest), altered bundles get through.
func TestX002_NegativeControl(t *testing.T) {
	t.Parallel()
	if taken := x002(t, true, []string{"WTX_DISABLE=bundle-digest"}); len(taken) == 0 {
		t.Fatal("negative control: every altered bundle was still refused with the digest checks off")
	}
}
