package wtx

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/receipt"
)

// The trust file lists the public keys whose signatures an import counts
// as trusted (T-005), as git's gpg.ssh.allowedSignersFile does for
// commits. It lives in the state root, private to its owner, one key a
// line:
//
//	ed25519 <base64 of the key's PKIX encoding> [name]
//
// (the base64 is the body of the PEM 'wtx receipt key' prints). Lines
// starting with '#' and blank lines are comments. A line that does not
// parse makes the whole file an error: a damaged trust file is never read
// as "trusts nobody" or "trusts what parsed".
const trustFileName = "trusted-keys"

// trustKeyType is the first field of a trust file line.
const trustKeyType = "ed25519"

// trustFileHeader starts a trust file wtx writes.
const trustFileHeader = "# wtx trusted receipt keys: an imported change set signed by one of these is trusted.\n" +
	"# One key a line: ed25519 <base64 of the PKIX public key> [name]. Edit with 'wtx receipt trust'.\n"

// OwnKeyName is the name under which the state root's own receipt key is
// trusted without a line in the trust file.
const OwnKeyName = "your own receipt key"

// RetiredKeyName is the name of a receipt key this state root had before
// 'receipt key new' replaced it: not trusted without a line.
const RetiredKeyName = "a replaced receipt key of yours"

// TrustedKey is one key of the trust file.
type TrustedKey struct {
	KeyID     string            `json:"key_id"`
	Name      string            `json:"name"`
	PublicKey ed25519.PublicKey `json:"-"`
}

// TrustFilePath is the trust file of the state root stateDir.
func TrustFilePath(stateDir string) string { return filepath.Join(stateDir, trustFileName) }

// LoadTrust reads the trust file of the state root stateDir (none: no
// key). A trust file that is a link, belongs to another user or does not
// parse is an error.
func LoadTrust(stateDir string) ([]TrustedKey, error) {
	p := TrustFilePath(stateDir)
	data, err := readTrustFile(stateDir, p)
	if data == nil || err != nil {
		return nil, err
	}
	keys, err := parseTrust(data)
	if err != nil {
		return nil, &Error{Code: CodeCorrupt, Err: err,
			Message: fmt.Sprintf("trust file %s is damaged: %v; wtx trusts no key until it is put right", p, err),
			Repairs: []Repair{{Action: "edit", Detail: "fix or remove the line, or restore the file from a backup"}}}
	}
	return keys, nil
}

// maxTrustFile bounds the trust file wtx reads.
const maxTrustFile = 1 << 20

// readTrustFile reads the trust file of stateDir, reached beneath the
// state root's handle: nil when there is none. It must be a regular file
// of the caller's (not a link, not a FIFO).
func readTrustFile(stateDir, p string) ([]byte, error) {
	root, err := fsx.OpenRoot(stateDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, stateIOError(stateDir, "open the state root", err)
	}
	defer root.Close()
	f, err := root.OpenFile(trustFileName, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		if st, lerr := root.Lstat(trustFileName); lerr == nil {
			switch {
			case st.IsSymlink():
				return nil, unsafeState(p, st, "is a symbolic link")
			case !st.IsRegular():
				return nil, unsafeState(p, st, "is not a regular file")
			}
		}
		return nil, stateIOError(stateDir, "read the trust file", err)
	}
	defer f.Close()
	st, err := fsx.StatOfFile(f)
	if err != nil {
		return nil, stateIOError(stateDir, "read the trust file", err)
	}
	if err := tighten(stateDir, root, trustFileName, st, privateFilePerm); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxTrustFile+1))
	if err != nil {
		return nil, stateIOError(stateDir, "read the trust file", err)
	}
	if len(data) > maxTrustFile {
		return nil, errorf(CodeCorrupt, "trust file %s is larger than %d bytes", p, maxTrustFile)
	}
	return append(data, '\n'), nil // never nil: the file exists
}

func parseTrust(data []byte) ([]TrustedKey, error) {
	var out []TrustedKey
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<10)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != trustKeyType {
			return nil, fmt.Errorf("line %d: want %q, a base64 key and an optional name", n, trustKeyType)
		}
		pub, err := parseKeyBase64(f[1])
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		k := TrustedKey{KeyID: receipt.KeyID(pub), Name: strings.Join(f[2:], " "), PublicKey: pub}
		if err := validTrustName(k.Name); err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		if seen[k.KeyID] {
			return nil, fmt.Errorf("line %d: key %s listed twice", n, k.KeyID)
		}
		seen[k.KeyID] = true
		out = append(out, k)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// parseKeyBase64 reads an ed25519 key from the base64 of its PKIX
// encoding.
func parseKeyBase64(s string) (ed25519.PublicKey, error) {
	der, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("key is not base64: %v", err)
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("key does not parse: %v", err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("key is %T, want ed25519", k)
	}
	return pub, nil
}

// ParseTrustKey reads a public key given to 'receipt trust add': a PEM
// public key (as 'wtx receipt key' prints it), a trust file line
// ("ed25519 BASE64 [name]") or the bare base64. It returns the name the
// line carries, if any.
func ParseTrustKey(data []byte) (ed25519.PublicKey, string, error) {
	if blk, _ := pem.Decode(data); blk != nil {
		pub, err := receipt.ParsePublicKey(data)
		return pub, "", err
	}
	f := strings.Fields(string(data))
	if len(f) > 0 && f[0] == trustKeyType {
		f = f[1:]
	}
	if len(f) == 0 {
		return nil, "", errorf(CodeUsage, "no key given: want a PEM public key (as 'wtx receipt key' prints) or %q and its base64", trustKeyType)
	}
	pub, err := parseKeyBase64(f[0])
	if err != nil {
		return nil, "", errorf(CodeUsage, "%v: want a PEM public key (as 'wtx receipt key' prints) or %q and its base64", err, trustKeyType)
	}
	return pub, strings.Join(f[1:], " "), nil
}

// validTrustName reports whether name fits on a trust file line: UTF-8,
// printable, no line break, at most 200 bytes. Spaces are kept.
func validTrustName(name string) error {
	if len(name) > 200 || !utf8.ValidString(name) {
		return errorf(CodeUsage, "key name: use at most 200 bytes of UTF-8")
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return errorf(CodeUsage, "key name %q: use printable characters on one line", name)
		}
	}
	return nil
}

// AddTrustedKey adds pub to the trust file under name. Adding a key that
// is there already changes its name (when one is given) and reports
// added false.
func AddTrustedKey(stateDir string, pub ed25519.PublicKey, name string) (k TrustedKey, added bool, err error) {
	name = strings.Join(strings.Fields(name), " ")
	if err := validTrustName(name); err != nil {
		return TrustedKey{}, false, err
	}
	k = TrustedKey{KeyID: receipt.KeyID(pub), Name: name, PublicKey: pub}
	err = editTrust(stateDir, func(keys []TrustedKey) ([]TrustedKey, error) {
		for i := range keys {
			if keys[i].KeyID == k.KeyID {
				if name == "" {
					k.Name = keys[i].Name
				}
				keys[i].Name = k.Name
				return keys, nil
			}
		}
		added = true
		return append(keys, k), nil
	})
	return k, added, err
}

// RemoveTrustedKey removes the keys of the trust file that which names:
// a key id (sha256:…, or a prefix of its hex of at least 8 digits) or a
// name. A name or prefix that matches more than one key is refused.
func RemoveTrustedKey(stateDir, which string) ([]TrustedKey, error) {
	var removed []TrustedKey
	err := editTrust(stateDir, func(keys []TrustedKey) ([]TrustedKey, error) {
		var keep []TrustedKey
		for _, k := range keys {
			if trustMatch(k, which) {
				removed = append(removed, k)
			} else {
				keep = append(keep, k)
			}
		}
		switch {
		case len(removed) == 0:
			return nil, errorf(CodeKeyNotFound, "no key of the trust file has the id or name %q", which)
		case len(removed) > 1:
			return nil, errorf(CodeUsage, "%q matches %d keys of the trust file: give the whole key id", which, len(removed))
		}
		return keep, nil
	})
	return removed, err
}

func trustMatch(k TrustedKey, which string) bool {
	if which == k.Name || which == k.KeyID {
		return true
	}
	h := strings.TrimPrefix(which, "sha256:")
	return len(h) >= 8 && strings.HasPrefix(strings.TrimPrefix(k.KeyID, "sha256:"), h)
}

// editTrust rewrites the trust file with what edit makes of its keys,
// under an exclusive lock on the state root (two edits never lose one),
// atomically (a crash leaves the old file or the new one).
func editTrust(stateDir string, edit func([]TrustedKey) ([]TrustedKey, error)) error {
	if err := prepareStateRoot(stateDir); err != nil {
		return err
	}
	d, err := os.Open(stateDir)
	if err != nil {
		return stateIOError(stateDir, "open", err)
	}
	defer d.Close()
	if err := unix.Flock(int(d.Fd()), unix.LOCK_EX); err != nil {
		return stateIOError(stateDir, "lock", err)
	}
	// Closing d releases the lock.
	keys, err := LoadTrust(stateDir)
	if err != nil {
		return err
	}
	keys, err = edit(keys)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	b.WriteString(trustFileHeader)
	for _, k := range keys {
		der, err := x509.MarshalPKIXPublicKey(k.PublicKey)
		if err != nil {
			return AsError(err)
		}
		fmt.Fprintf(&b, "%s %s", trustKeyType, base64.StdEncoding.EncodeToString(der))
		if k.Name != "" {
			b.WriteString(" " + k.Name)
		}
		b.WriteByte('\n')
	}
	root, err := fsx.OpenRoot(stateDir)
	if err != nil {
		return stateIOError(stateDir, "open the state root", err)
	}
	defer root.Close()
	if err := root.WriteFileAtomic(trustFileName, b.Bytes(), privateFilePerm); err != nil {
		return stateIOError(stateDir, "write the trust file", err)
	}
	return nil
}

// keyRing is every key an import can check a signature with: the ones
// the change set carries (not trusted by themselves), the trust file's
// and the state root's own.
type keyRing struct {
	byID map[string]ringKey
}

type ringKey struct {
	pub     ed25519.PublicKey
	trusted bool
	name    string
}

// keyRing builds the ring for an import of a change set carrying keys
// carried (raw ed25519 public keys).
func (w *Workspace) keyRing(carried [][]byte) (*keyRing, error) {
	r := &keyRing{byID: map[string]ringKey{}}
	for _, raw := range carried {
		pub := ed25519.PublicKey(bytes.Clone(raw))
		r.byID[receipt.KeyID(pub)] = ringKey{pub: pub}
	}
	trusted, err := LoadTrust(w.stateDir)
	if err != nil {
		return nil, err
	}
	for _, k := range trusted {
		r.byID[k.KeyID] = ringKey{pub: k.PublicKey, trusted: true, name: k.Name}
	}
	current, earlier, err := ownPublicKeys(w.stateDir)
	if err != nil {
		// Own keys that cannot be read trust nothing; the import says
		// which key signed, and fsck and the next receipt say what is
		// wrong with the key.
		w.log.Warn("receipt keys unreadable: not counted as trusted", "err", err)
	}
	// A key 'receipt key new' replaced may have been replaced because it
	// leaked: what it signed verifies, but is trusted only by a line of
	// the trust file, as any other key.
	for _, pub := range earlier {
		if k, ok := r.byID[receipt.KeyID(pub)]; !ok || k.name == "" {
			r.byID[receipt.KeyID(pub)] = ringKey{pub: pub, trusted: failpoint.Disabled(disableRetiredUntrusted), name: RetiredKeyName}
		}
	}
	if current != nil {
		if k, ok := r.byID[receipt.KeyID(current)]; !ok || !k.trusted || k.name == "" {
			r.byID[receipt.KeyID(current)] = ringKey{pub: current, trusted: true, name: OwnKeyName}
		}
	}
	return r, nil
}

// disableRetiredUntrusted is the negative control of the rule that a
// replaced key of the state root is not trusted by itself: with it set,
// every key the state root has had is trusted.
const disableRetiredUntrusted = "retired-key-trust"

// ownPublicKeys are the public half of the state root's receipt key now
// (nil when it has none) and those of the keys it had before (its
// keyring, less the current one).
func ownPublicKeys(stateDir string) (current ed25519.PublicKey, earlier []ed25519.PublicKey, err error) {
	root, keys, err := openKeys(stateDir, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	defer keys.Close()
	ring, err := readKeyring(keys)
	priv, kerr := readReceiptKey(stateDir)
	var ke *keyError
	switch {
	case kerr == nil:
		current = priv.Public().(ed25519.PublicKey)
	case errors.As(kerr, &ke) && ke.problem == keyMissing:
	case err == nil:
		err = kerr
	}
	for _, pub := range ring.keys {
		if !pub.Equal(current) {
			earlier = append(earlier, pub)
		}
	}
	return current, earlier, err
}

// ExistingReceiptPublicKey returns the public half of the state root's
// receipt key without making one (nil when there is none).
func ExistingReceiptPublicKey(stateDir string) (ed25519.PublicKey, error) {
	priv, err := readReceiptKey(stateDir)
	var ke *keyError
	if errors.As(err, &ke) && ke.problem == keyMissing {
		return nil, nil
	}
	if err != nil {
		return nil, keyErrorOf(err)
	}
	return priv.Public().(ed25519.PublicKey), nil
}
