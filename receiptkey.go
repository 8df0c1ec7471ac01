package wtx

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/receipt"
)

// The receipt key. A state root has one: keys/receipt-ed25519.pem (PKCS#8
// PEM, 0600 in the 0700 keys directory). Its keyring, keys/public/, holds
// the public half of every key the state root has had, each in
// <hex of its key id>.pem, so that a receipt still verifies after its key
// was replaced.
//
// wtx makes a key on its own only for a fresh state root: one with no
// database, nothing a database would have recorded, no key and an empty
// keyring. The command that creates the database makes it (any command
// that opens a workspace there), and so does 'receipt key'. Otherwise a
// key is made only when asked (NewReceiptKey). A key that is missing,
// damaged, or not private to its owner is an error, with its repairs, for
// every command that signs a receipt, before that command changes
// anything: no receipt is ever stored unsigned, and none is signed with a
// key nobody asked for.
const (
	keyringDirName  = "public"
	setAsideDirName = "set-aside"
	// retiredDirName holds the public halves of the keys NewReceiptKey
	// replaced: they still verify old receipts, and never sign again.
	retiredDirName = "retired"
	keyTempPrefix  = ".new-key-"
	keyMaxSize     = 16 << 10
)

// Repair actions for the receipt key.
const (
	// RepairRestoreKey: put the key file (Paths[0]) back from a backup of
	// the state root.
	RepairRestoreKey RepairAction = "restore-key"
	// RepairNewKey: make a new receipt key; receipts signed with the old
	// one verify with its public half, which the keyring keeps.
	RepairNewKey RepairAction = "new-key"
	// RepairPrivateKey: make the key file (Paths[0]) private again, if
	// nobody else can have read it.
	RepairPrivateKey RepairAction = "private-key"
)

// keyProblem says what is wrong with the receipt key.
type keyProblem int

const (
	keyMissing keyProblem = iota + 1 // no key file
	keyDamaged                       // not a key, or not one this state root has had
	keyUnsafe                        // a link, or another user's
	keyOpen                          // readable or writable by group or others
)

// keyError is a receipt key that cannot be used.
type keyError struct {
	problem keyProblem
	path    string
	why     string
	err     error
}

func (e *keyError) Error() string { return "receipt key " + e.path + " " + e.why }
func (e *keyError) Unwrap() error { return e.err }

// asError is the key's error as the API reports it: a code and repairs.
func (e *keyError) asError() *Error {
	restore := Repair{Action: RepairRestoreKey, Paths: []string{e.path},
		Detail: "put the key file back from a backup of the state root"}
	fresh := Repair{Action: RepairNewKey,
		Detail: "make a new receipt key; receipts signed with the old key still verify with its public half, which the state root keeps in keys/public"}
	if e.problem != keyMissing {
		fresh.Detail = "make a new receipt key (what is in the key's place now is set aside into keys/set-aside); receipts signed with the old key still verify with its public half, which the state root keeps in keys/public"
	}
	out := &Error{Err: e, Repairs: []Repair{restore, fresh}}
	switch e.problem {
	case keyMissing:
		out.Code = CodeStateLost
		out.Message = fmt.Sprintf("the receipt key %s is missing: wtx signs every receipt and never makes a new key on its own (receipts signed with the lost key verify only with its public half)", e.path)
	case keyDamaged:
		out.Code = CodeCorrupt
		out.Message = fmt.Sprintf("the receipt key %s %s: no receipt is signed with it", e.path, e.why)
	case keyOpen:
		out.Code = CodeStateUnsafe
		out.Message = fmt.Sprintf("the receipt key %s %s: wtx does not sign with it", e.path, e.why)
		out.Repairs = []Repair{{Action: RepairPrivateKey, Paths: []string{e.path},
			Detail: "if nobody else can have read it, make it private again (chmod 600)"}, fresh}
	default:
		out.Code = CodeStateUnsafe
		out.Message = fmt.Sprintf("the receipt key %s %s: wtx does not sign with it", e.path, e.why)
	}
	return out
}

// keyErrorOf is err as the API reports it.
func keyErrorOf(err error) *Error {
	var ke *keyError
	if errors.As(err, &ke) {
		return ke.asError()
	}
	return AsError(err)
}

func receiptKeyPath(stateDir string) string {
	return filepath.Join(stateDir, keysDirName, receiptKeyName)
}

// openKeys opens the state root and its keys directory, following no
// link; create makes a missing keys directory.
func openKeys(stateDir string, create bool) (*fsx.Root, *fsx.Dir, error) {
	root, err := fsx.OpenRoot(stateDir)
	if err != nil {
		return nil, nil, err
	}
	keys, err := root.OpenDir(keysDirName)
	if errors.Is(err, fs.ErrNotExist) && create {
		if err = mkdirPrivate(root, keysDirName); err == nil {
			keys, err = root.OpenDir(keysDirName)
		}
	}
	if err != nil {
		root.Close()
		if errors.Is(err, fsx.ErrSymlink) || errors.Is(err, fsx.ErrNotDir) {
			return nil, nil, &keyError{problem: keyUnsafe, path: filepath.Join(stateDir, keysDirName), why: "is not a directory of its own (a link, or another file): wtx never follows one to its key", err: err}
		}
		return nil, nil, err
	}
	return root, keys, nil
}

// mkdirPrivate makes the directory name in the state root, 0700; one that
// exists already is left to the caller's checks.
func mkdirPrivate(root *fsx.Root, name string) error {
	d, err := root.OpenDir(".")
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Mkdir(name, privateDirPerm); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// readReceiptKey reads the state root's receipt key. A key that cannot be
// used is a *keyError: missing, damaged (not an ed25519 PEM private key,
// or one whose public half the keyring lacks while it holds others: a
// changed file), or unsafe (a link or not a regular file, another user's,
// readable or writable by group or others).
func readReceiptKey(stateDir string) (ed25519.PrivateKey, error) {
	p := receiptKeyPath(stateDir)
	root, keys, err := openKeys(stateDir, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &keyError{problem: keyMissing, path: p, why: "is missing", err: err}
	}
	if err != nil {
		return nil, err
	}
	defer root.Close()
	defer keys.Close()
	priv, err := readKeyIn(keys, p)
	if err != nil {
		return nil, err
	}
	ring, err := readKeyring(keys)
	if err != nil {
		return nil, err
	}
	if len(ring.keys) > 0 && !ring.has(priv.Public().(ed25519.PublicKey)) {
		return nil, &keyError{problem: keyDamaged, path: p,
			why: fmt.Sprintf("holds key %s, which is none this state root has had (keys/public): the file was changed or put there from elsewhere", receipt.KeyID(priv.Public().(ed25519.PublicKey)))}
	}
	if retired(keys, priv.Public().(ed25519.PublicKey)) {
		return nil, &keyError{problem: keyDamaged, path: p,
			why: fmt.Sprintf("holds key %s, which a new receipt key replaced (keys/retired): an old key put back, from a backup made before the new one or by someone who kept it, never signs again", receipt.KeyID(priv.Public().(ed25519.PublicKey)))}
	}
	return priv, nil
}

// retired reports whether NewReceiptKey replaced pub: its public half is
// in keys/retired of the open keys directory.
func retired(keys *fsx.Dir, pub ed25519.PublicKey) bool {
	if failpoint.Disabled("receipt-key-retired") {
		return false // negative control of T-006
	}
	d, err := keys.OpenDir(retiredDirName)
	if err != nil {
		return false // none retired (or nothing readable there, which fsck reports with the key's directory)
	}
	defer d.Close()
	got, why := readKeyringEntry(d, keyringName(pub))
	return why == "" && got.Equal(pub)
}

// retireKey puts pub into keys/retired of the open keys directory.
func retireKey(keys *fsx.Dir, pub ed25519.PublicKey) error {
	if err := keys.Mkdir(retiredDirName, privateDirPerm); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	d, err := keys.OpenDir(retiredDirName)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := writePrivate(d, keyringName(pub), receipt.PublicKeyPEM(pub), true); err != nil {
		return err
	}
	return keys.Sync()
}

// readKeyIn reads the key file of the open keys directory (p names it in
// errors).
func readKeyIn(keys *fsx.Dir, p string) (ed25519.PrivateKey, error) {
	f, err := keys.Open(receiptKeyName)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &keyError{problem: keyMissing, path: p, why: "is missing", err: err}
	case errors.Is(err, fsx.ErrSymlink):
		return nil, &keyError{problem: keyUnsafe, path: p, why: "is a symbolic link: wtx never follows one to its key", err: err}
	case errors.Is(err, fsx.ErrNotRegular), errors.Is(err, fsx.ErrCrossDevice):
		return nil, &keyError{problem: keyDamaged, path: p, why: "is not a regular file", err: err}
	case err != nil:
		return nil, err
	}
	defer f.Close()
	st := f.Stat()
	if uid := os.Geteuid(); int(st.UID) != uid {
		return nil, &keyError{problem: keyUnsafe, path: p, why: fmt.Sprintf("belongs to uid %d, not to you (uid %d)", st.UID, uid)}
	}
	if st.Mode.Perm()&0o077 != 0 {
		return nil, &keyError{problem: keyOpen, path: p, why: fmt.Sprintf("is readable or writable by others (mode %04o): it may have been copied", st.Mode.Perm())}
	}
	if st.Size > keyMaxSize {
		return nil, &keyError{problem: keyDamaged, path: p, why: fmt.Sprintf("is %d bytes, not a key", st.Size)}
	}
	data, _, err := f.ReadSmall(nil)
	if err != nil {
		return nil, err
	}
	priv, why := parsePrivateKey(data)
	if why != "" {
		return nil, &keyError{problem: keyDamaged, path: p, why: why}
	}
	return priv, nil
}

// parsePrivateKey reads a PKCS#8 PEM ed25519 private key; why says what
// is wrong when it is not one.
func parsePrivateKey(data []byte) (ed25519.PrivateKey, string) {
	blk, rest := pem.Decode(data)
	if blk == nil || blk.Type != receiptKeyPEMType {
		return nil, "is not a PEM private key"
	}
	if len(strings.TrimSpace(string(rest))) > 0 {
		return nil, "holds more than one key"
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, "does not parse: " + err.Error()
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Sprintf("is a %T, not an ed25519 key", k)
	}
	return priv, ""
}

// keyring is the public halves of the keys a state root has had. bad
// names the entries that are not one (for fsck).
type keyring struct {
	keys []ed25519.PublicKey
	bad  map[string]string // entry name → what is wrong
}

func (r keyring) has(pub ed25519.PublicKey) bool {
	for _, k := range r.keys {
		if k.Equal(pub) {
			return true
		}
	}
	return false
}

// keyringName is the file name of pub in the keyring.
func keyringName(pub ed25519.PublicKey) string {
	return strings.TrimPrefix(receipt.KeyID(pub), "sha256:") + ".pem"
}

// readKeyring reads keys/public of the open keys directory. Entries that
// are not the public key their name says are left out, and listed in bad.
func readKeyring(keys *fsx.Dir) (keyring, error) {
	ring := keyring{bad: map[string]string{}}
	d, err := keys.OpenDir(keyringDirName)
	if errors.Is(err, fs.ErrNotExist) {
		return ring, nil
	}
	if err != nil {
		ring.bad[keyringDirName] = err.Error()
		return ring, nil
	}
	defer d.Close()
	names, err := d.ReadDir()
	if err != nil {
		return ring, err
	}
	for _, n := range names {
		if strings.HasPrefix(n, keyTempPrefix) {
			continue // one being written, or left by a crash: not an entry
		}
		pub, why := readKeyringEntry(d, n)
		if why != "" {
			ring.bad[n] = why
			continue
		}
		ring.keys = append(ring.keys, pub)
	}
	return ring, nil
}

// readKeyringEntry reads one entry of the keyring; why says what is wrong
// with it.
func readKeyringEntry(d *fsx.Dir, name string) (ed25519.PublicKey, string) {
	h, ok := strings.CutSuffix(name, ".pem")
	if _, err := hex.DecodeString(h); !ok || err != nil || len(h) != 64 {
		return nil, "is not named <key id>.pem"
	}
	f, err := d.Open(name)
	if err != nil {
		return nil, "cannot be read: " + err.Error()
	}
	defer f.Close()
	if f.Stat().Size > keyMaxSize {
		return nil, "is too large to be a public key"
	}
	data, _, err := f.ReadSmall(nil)
	if err != nil {
		return nil, "cannot be read: " + err.Error()
	}
	pub, err := receipt.ParsePublicKey(data)
	if err != nil {
		return nil, AsError(err).Message
	}
	if keyringName(pub) != name {
		return nil, "holds key " + receipt.KeyID(pub) + ", not the one its name says"
	}
	return pub, ""
}

// writePrivate writes data to name in d through a temporary file made
// durable first; replace says whether an existing name is replaced (else
// the write fails with fs.ErrExist).
func writePrivate(d *fsx.Dir, name string, data []byte, replace bool) error {
	f, tmp, err := d.CreateTempFile(keyTempPrefix, privateFilePerm)
	if err != nil {
		return err
	}
	err = f.Chmod(privateFilePerm)
	if err == nil {
		err = f.WriteAt(data, 0)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if replace {
			err = d.Rename(tmp, d, name)
		} else {
			err = d.RenameNoReplace(tmp, d, name)
		}
	}
	if err != nil {
		_ = d.Unlink(tmp) // the write's error is the one to report; a leftover temporary name is skipped
		return err
	}
	return d.Sync()
}

// keepPublic adds pub to the keyring of the open keys directory, if it is
// not there.
func keepPublic(keys *fsx.Dir, pub ed25519.PublicKey) error {
	d, err := keys.OpenDir(keyringDirName)
	if errors.Is(err, fs.ErrNotExist) {
		if err = keys.Mkdir(keyringDirName, privateDirPerm); err == nil || errors.Is(err, fs.ErrExist) {
			d, err = keys.OpenDir(keyringDirName)
		}
	}
	if err != nil {
		return err
	}
	defer d.Close()
	if pubOf, why := readKeyringEntry(d, keyringName(pub)); why == "" && pubOf.Equal(pub) {
		return nil
	}
	if err := writePrivate(d, keyringName(pub), receipt.PublicKeyPEM(pub), true); err != nil {
		return err
	}
	return keys.Sync()
}

// newKeyPEM makes an ed25519 key and its PKCS#8 PEM.
func newKeyPEM() (ed25519.PrivateKey, []byte, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, err
	}
	return priv, pem.EncodeToMemory(&pem.Block{Type: receiptKeyPEMType, Bytes: der}), nil
}

// freshStateRoot reports whether the state root holds no database and
// nothing a database would have recorded: the only state root wtx makes a
// receipt key for on its own.
func freshStateRoot(stateDir string) bool {
	if _, err := os.Lstat(filepath.Join(stateDir, dbName)); !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	return !countLeftovers(stateDir).any()
}

// makeFirstKey makes the receipt key of a fresh state root, unless it has
// one or had one (its keyring is not empty). Concurrent first uses agree
// on one key. A state root that is not fresh is left alone: its key, if
// missing, is an error when a receipt is signed.
func makeFirstKey(stateDir string) error {
	if !freshStateRoot(stateDir) {
		return nil
	}
	root, keys, err := openKeys(stateDir, true)
	if err != nil {
		return keyErrorOf(err)
	}
	defer root.Close()
	defer keys.Close()
	if _, err := keys.Lstat(receiptKeyName); !errors.Is(err, fs.ErrNotExist) {
		return nil // there is one (or something in its place, which signing reports)
	}
	if ring, err := readKeyring(keys); err != nil || len(ring.keys) > 0 || len(ring.bad) > 0 {
		return nil // it had one: a lost key is reported, never replaced
	}
	return makeKeyIn(stateDir, keys)
}

// makeKeyIn makes a key where there is none; a key another process put
// there first wins. The public half goes to the keyring once the key is
// in place.
func makeKeyIn(stateDir string, keys *fsx.Dir) error {
	priv, data, err := newKeyPEM()
	if err != nil {
		return AsError(err)
	}
	err = writePrivate(keys, receiptKeyName, data, false)
	if errors.Is(err, fs.ErrExist) {
		return nil // another first use made it
	}
	if err != nil {
		return stateIOError(stateDir, "make the receipt key", err)
	}
	if err := keepPublic(keys, priv.Public().(ed25519.PublicKey)); err != nil {
		return stateIOError(stateDir, "keep the receipt key's public half", err)
	}
	return nil
}

// KeyChange is what NewReceiptKey did.
type KeyChange struct {
	// KeyID names the new key.
	KeyID string `json:"key_id"`
	// Replaced names the key it replaces ("" when there was none that
	// could be read).
	Replaced string `json:"replaced,omitempty"`
	// SetAside is where the file that held the old key (or whatever was
	// in its place) was moved: keys/set-aside in the state root.
	SetAside string `json:"set_aside,omitempty"`
	// Kept names every key whose public half the state root keeps, the new
	// one included: receipts signed with any of them verify.
	Kept []string `json:"kept"`
}

// NewReceiptKey makes a new receipt key for the state root stateDir, as
// asked for: the old key file (or whatever is in its place, a link
// included, never followed) is set aside into keys/set-aside, the old key's
// public half stays in the keyring when the old key could be read, and
// the new one's joins it before the new key is put in place. Receipts
// signed with the old key keep verifying against this state root; whoever
// checks them elsewhere needs the old public key.
func NewReceiptKey(stateDir string) (*KeyChange, error) {
	if err := prepareStateRoot(stateDir); err != nil {
		return nil, err
	}
	root, keys, err := openKeys(stateDir, true)
	if err != nil {
		return nil, keyErrorOf(err)
	}
	defer root.Close()
	defer keys.Close()
	ch := &KeyChange{}
	var old ed25519.PublicKey
	if priv, err := readReceiptKey(stateDir); err == nil {
		old = priv.Public().(ed25519.PublicKey)
		ch.Replaced = receipt.KeyID(old)
		if err := keepPublic(keys, old); err != nil {
			return nil, stateIOError(stateDir, "keep the old key's public half", err)
		}
	}
	priv, data, err := newKeyPEM()
	if err != nil {
		return nil, AsError(err)
	}
	pub := priv.Public().(ed25519.PublicKey)
	if err := keepPublic(keys, pub); err != nil {
		return nil, stateIOError(stateDir, "keep the new key's public half", err)
	}
	if old != nil {
		if err := retireKey(keys, old); err != nil {
			return nil, stateIOError(stateDir, "retire the old key", err)
		}
	}
	if ch.SetAside, err = setAsideKey(stateDir, keys); err != nil {
		return nil, err
	}
	if err := writePrivate(keys, receiptKeyName, data, false); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, errorf(CodeLocked, "another receipt key was put in place while this one was made: nothing was replaced; look at it with 'receipt key', or ask again")
		}
		return nil, stateIOError(stateDir, "put the new receipt key in place", err)
	}
	ch.KeyID = receipt.KeyID(pub)
	ring, err := readKeyring(keys)
	if err != nil {
		return nil, stateIOError(stateDir, "read the keyring", err)
	}
	for _, k := range ring.keys {
		ch.Kept = append(ch.Kept, receipt.KeyID(k))
	}
	sort.Strings(ch.Kept)
	return ch, nil
}

// setAsideKey moves whatever is at the key's name into keys/set-aside/,
// as it is (a link stays a link), named by the time, and returns where it
// went ("" when there was nothing). It stays under keys/, which no command
// in a view can see: an old private key must not sign for the user
// either.
func setAsideKey(stateDir string, keys *fsx.Dir) (string, error) {
	if _, err := keys.Lstat(receiptKeyName); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err := keys.Mkdir(setAsideDirName, privateDirPerm); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", stateIOError(stateDir, "set the old receipt key aside", err)
	}
	dst, err := keys.OpenDir(setAsideDirName)
	if err != nil {
		return "", stateIOError(stateDir, "set the old receipt key aside", err)
	}
	defer dst.Close()
	name := time.Now().UTC().Format("20060102T150405.000000000Z") + "-" + receiptKeyName
	if err := keys.RenameNoReplace(receiptKeyName, dst, name); err != nil {
		return "", stateIOError(stateDir, "set the old receipt key aside", err)
	}
	if err := keys.Sync(); err != nil {
		return "", stateIOError(stateDir, "set the old receipt key aside", err)
	}
	return filepath.Join(stateDir, keysDirName, setAsideDirName, name), nil
}

// ReceiptKeyInfo is one key receipts of a state root verify with.
type ReceiptKeyInfo struct {
	KeyID     string            `json:"key_id"`
	PublicKey ed25519.PublicKey `json:"-"`
	// Current is set for the key receipts are signed with now.
	Current bool `json:"current"`
}

// ReceiptKeys lists the keys receipts of the state root verify with: the
// current key first (when it can be read), then every other key the
// keyring keeps, by id. It changes nothing. A current key that cannot be
// used is returned as the error beside the keyring's keys.
func ReceiptKeys(stateDir string) ([]ReceiptKeyInfo, error) {
	var out []ReceiptKeyInfo
	priv, kerr := readReceiptKey(stateDir)
	var cur ed25519.PublicKey
	if kerr == nil {
		cur = priv.Public().(ed25519.PublicKey)
		out = append(out, ReceiptKeyInfo{KeyID: receipt.KeyID(cur), PublicKey: cur, Current: true})
	}
	root, keys, err := openKeys(stateDir, false)
	if err == nil && failpoint.Disabled("receipt-keyring") {
		keys.Close()
		root.Close()
		err = fs.ErrNotExist // negative control: only the current key counts
	}
	if err == nil {
		ring, rerr := readKeyring(keys)
		keys.Close()
		root.Close()
		if rerr != nil {
			return out, AsError(rerr)
		}
		var rest []ReceiptKeyInfo
		for _, k := range ring.keys {
			if cur == nil || !k.Equal(cur) {
				rest = append(rest, ReceiptKeyInfo{KeyID: receipt.KeyID(k), PublicKey: k})
			}
		}
		sort.Slice(rest, func(i, j int) bool { return rest[i].KeyID < rest[j].KeyID })
		out = append(out, rest...)
	}
	if kerr != nil {
		return out, keyErrorOf(kerr)
	}
	return out, nil
}
