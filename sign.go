package wtx

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"path/filepath"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/receipt"
)

// A signed receipt is an in-toto Statement v1 whose predicate is the
// receipt, in a DSSE envelope signed with the state root's receipt key
// (package receipt). This file keeps the signing with that key.

// Names of the receipt key in the state root.
const (
	keysDirName       = "keys"
	receiptKeyName    = "receipt-ed25519.pem"
	receiptKeyPEMType = "PRIVATE KEY"
)

// signingKey is the state root's receipt key, for signing: a key that
// cannot be used is an error (see readReceiptKey). A key whose public
// half the keyring lacks (a state root made before it had one) is added
// to it.
func (w *Workspace) signingKey() (ed25519.PrivateKey, error) {
	priv, err := readReceiptKey(w.stateDir)
	var ke *keyError
	if errors.As(err, &ke) && ke.problem == keyMissing && failpoint.Disabled("receipt-key-create") {
		// Negative control: the old quiet way, a new key in place of a
		// lost one.
		if root, keys, oerr := openKeys(w.stateDir, true); oerr == nil {
			_ = makeKeyIn(w.stateDir, keys) // the read below says how it went
			keys.Close()
			root.Close()
		}
		priv, err = readReceiptKey(w.stateDir)
	}
	if err != nil {
		return nil, keyErrorOf(err)
	}
	root, keys, err := openKeys(w.stateDir, false)
	if err != nil {
		return nil, keyErrorOf(err)
	}
	defer root.Close()
	defer keys.Close()
	if err := keepPublic(keys, priv.Public().(ed25519.PublicKey)); err != nil {
		return nil, stateIOError(w.stateDir, "keep the receipt key's public half", err)
	}
	return priv, nil
}

// checkReceiptKey refuses, before a command that signs a receipt changes
// anything, a receipt key it could not sign with.
func (w *Workspace) checkReceiptKey() error {
	if _, err := w.signingKey(); err != nil && !failpoint.Disabled("receipt-key-check") {
		return err
	}
	return nil
}

// ReceiptPublicKey returns the public half of the state root's receipt
// key. A key that cannot be used is an error; none is made.
func (w *Workspace) ReceiptPublicKey() (ed25519.PublicKey, error) {
	priv, err := readReceiptKey(w.stateDir)
	if err != nil {
		return nil, keyErrorOf(err)
	}
	return priv.Public().(ed25519.PublicKey), nil
}

// ReceiptPublicKeyOf is ReceiptPublicKey of the state root stateDir. A
// fresh state root (see makeFirstKey) gets its first key.
func ReceiptPublicKeyOf(stateDir string) (ed25519.PublicKey, error) {
	if !filepath.IsAbs(stateDir) {
		return nil, errorf(CodeUsage, "state root %q must be an absolute path", stateDir)
	}
	dir, err := canonicalMaybeMissing(stateDir)
	if err != nil {
		return nil, AsError(err)
	}
	if freshStateRoot(dir) {
		if err := prepareStateRoot(dir); err != nil {
			return nil, err
		}
		if err := makeFirstKey(dir); err != nil {
			return nil, err
		}
	}
	priv, err := readReceiptKey(dir)
	if err != nil {
		return nil, keyErrorOf(err)
	}
	return priv.Public().(ed25519.PublicKey), nil
}

// receiptBody is what the state keeps of a receipt: its signed envelope.
// A key that cannot be used is an error: a receipt is never stored
// unsigned.
func (w *Workspace) receiptBody(r Receipt) ([]byte, error) {
	priv, err := w.signingKey()
	if err != nil {
		if !failpoint.Disabled("receipt-key-check") {
			return nil, err
		}
		// Negative control: the old quiet way.
		w.log.Warn("receipt left unsigned", "receipt", r.ID, "err", err)
		return json.Marshal(r)
	}
	env, err := receipt.Sign(priv, r)
	if err != nil {
		return nil, AsError(err)
	}
	return json.Marshal(env)
}
