package blob

import (
	"errors"
	"strings"
	"testing"
)

func TestSum(t *testing.T) {
	tests := []struct {
		in   string
		want Digest
	}{
		{"", "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	}
	for _, tt := range tests {
		got := Sum([]byte(tt.in))
		if got != tt.want {
			t.Errorf("Sum(%q) = %s, want %s", tt.in, got, tt.want)
		}
		if !got.Valid() {
			t.Errorf("Sum(%q) = %s is not Valid", tt.in, got)
		}
		if got.Hex() != strings.TrimPrefix(string(tt.want), "sha256:") {
			t.Errorf("Hex() = %q", got.Hex())
		}
	}
}

func TestDigestValid(t *testing.T) {
	good := string(Sum([]byte("x")))
	hex := strings.TrimPrefix(good, "sha256:")
	tests := []struct {
		name string
		d    string
		want bool
	}{
		{"well formed", good, true},
		{"empty", "", false},
		{"no prefix", hex, false},
		{"other algorithm", "sha512:" + hex, false},
		{"upper case prefix", "SHA256:" + hex, false},
		{"upper case hex", "sha256:" + strings.ToUpper(hex), false},
		{"short", good[:len(good)-1], false},
		{"long", good + "0", false},
		{"non hex", "sha256:" + strings.Repeat("g", 64), false},
		{"traversal", "sha256:../../x", false},
		{"traversal padded to length", "sha256:../../" + strings.Repeat("a", 58), false},
		{"slash inside", "sha256:ab/" + hex[3:], false},
		{"nul inside", "sha256:" + hex[:63] + "\x00", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Digest(tt.d)
			if got := d.Valid(); got != tt.want {
				t.Fatalf("Valid(%q) = %v, want %v", tt.d, got, tt.want)
			}
			if !tt.want && d.Hex() != "" {
				t.Errorf("Hex(%q) = %q, want empty", tt.d, d.Hex())
			}
			_, err := ParseDigest(tt.d)
			if tt.want != (err == nil) {
				t.Errorf("ParseDigest(%q) error = %v", tt.d, err)
			}
			if err != nil && !errors.Is(err, ErrInvalidDigest) {
				t.Errorf("ParseDigest(%q) error %v does not wrap ErrInvalidDigest", tt.d, err)
			}
		})
	}
}

func TestHasherMatchesSum(t *testing.T) {
	data := []byte(strings.Repeat("wtx hashes in pieces ", 1000))
	h := NewHasher()
	for i := 0; i < len(data); i += 777 {
		end := min(i+777, len(data))
		h.Write(data[i:end])
	}
	want := Sum(data)
	if got := h.Digest(); got != want {
		t.Fatalf("Hasher.Digest() = %s, want %s", got, want)
	}
	// Digest must not disturb the running state.
	if got := h.Digest(); got != want {
		t.Fatalf("second Digest() = %s, want %s", got, want)
	}
	h.Write([]byte("more"))
	if got, want := h.Digest(), Sum(append(data, "more"...)); got != want {
		t.Fatalf("after more writes Digest() = %s, want %s", got, want)
	}
}
