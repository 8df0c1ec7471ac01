package blob

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"
)

// prefix is the algorithm tag every digest starts with.
const prefix = "sha256:"

// hexLen is the number of hex digits of a SHA-256 sum.
const hexLen = 2 * sha256.Size

// ErrInvalidDigest is wrapped by errors about a digest that is not of the
// form "sha256:<64 lowercase hex digits>".
var ErrInvalidDigest = errors.New("invalid digest")

// A Digest names an object by its content: "sha256:" followed by 64
// lowercase hex digits.
type Digest string

// Sum returns the digest of data.
func Sum(data []byte) Digest {
	sum := sha256.Sum256(data)
	return Digest(prefix + hex.EncodeToString(sum[:]))
}

// ParseDigest returns s as a Digest, or an error wrapping [ErrInvalidDigest]
// when s is not well formed.
func ParseDigest(s string) (Digest, error) {
	d := Digest(s)
	if !d.Valid() {
		return "", fmt.Errorf("parse digest %q: %w", s, ErrInvalidDigest)
	}
	return d, nil
}

// Valid reports whether d is well formed: the "sha256:" prefix followed by
// exactly 64 lowercase hex digits.
func (d Digest) Valid() bool {
	h, ok := strings.CutPrefix(string(d), prefix)
	if !ok || len(h) != hexLen {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Hex returns the 64 hex digits of d, or "" if d is not valid.
func (d Digest) Hex() string {
	if !d.Valid() {
		return ""
	}
	return string(d[len(prefix):])
}

// String returns d as a string.
func (d Digest) String() string { return string(d) }

// A Hasher computes a [Digest] of the bytes written to it. It implements
// [hash.Hash].
type Hasher struct {
	hash.Hash
}

// NewHasher returns a Hasher with nothing written.
func NewHasher() *Hasher {
	return &Hasher{Hash: sha256.New()}
}

// Digest returns the digest of the bytes written so far. It does not change
// the Hasher's state.
func (h *Hasher) Digest() Digest {
	var buf [sha256.Size]byte
	return Digest(prefix + hex.EncodeToString(h.Sum(buf[:0])))
}
