package wtx

import (
	"errors"
	"fmt"

	"github.com/wtx-dev/wtx/receipt"
)

// VerifyReceipt checks a receipt document (see receipt.Verify) with the
// keys of the state root stateDir: its current key and every older one
// its keyring keeps. To check with the signer's public key instead, call
// receipt.Verify with VerifyOptions.PublicKey. A bare receipt that passes
// the checks is reported with its Verification and an error
// (CodeReceiptInvalid) that says it is unsigned.
func VerifyReceipt(stateDir string, data []byte) (*receipt.Verification, error) {
	var kerr error
	tried := 0
	ring := func() ([]receipt.Key, error) { // called for a signed document only
		keys, err := stateRootKeys(stateDir)
		tried, kerr = len(keys), err
		return keys, err
	}
	v, err := receipt.Verify(data, receipt.VerifyOptions{Keyring: ring})
	if err == nil {
		return v, nil
	}
	if errors.Is(err, receipt.ErrNoKey) {
		if kerr == nil {
			kerr = errors.New("the state root keeps no key")
		}
		ke := AsError(kerr)
		return nil, &Error{Code: CodeReceiptInvalid, Err: kerr, Repairs: ke.Repairs,
			Message: fmt.Sprintf("no receipt key of your own to check the signature with (%s): pass the signer's public key with --key", ke.Message)}
	}
	e := AsError(err)
	var re *receipt.Error
	if kerr != nil && errors.As(err, &re) && envelopeCheck(re.Check) {
		// The keyring's keys were tried, but its current key was not
		// among them: say so beside why the envelope was refused.
		e.Message += fmt.Sprintf(" (checked with the %d key(s) the state root keeps; its current key cannot be used: %s)", tried, AsError(kerr).Message)
	}
	return v, e
}

// envelopeCheck reports whether c is one of the checks of a signed
// envelope (not of what the answer carries beside it, nor the disclaimer).
func envelopeCheck(c receipt.Check) bool {
	switch c {
	case receipt.CheckSignature, receipt.CheckStatement, receipt.CheckFields, receipt.CheckDigest, receipt.CheckSubjects:
		return true
	}
	return false
}

// stateRootKeys are the keys to check a signature with: the state root's
// current key and the older ones its keyring keeps. A current key that
// cannot be used is returned as the error beside the others.
func stateRootKeys(stateDir string) ([]receipt.Key, error) {
	if stateDir == "" {
		return nil, errorf(CodeUsage, "no public key to check the signature with")
	}
	infos, err := ReceiptKeys(stateDir)
	var out []receipt.Key
	for _, k := range infos {
		src := receipt.KeyRetired
		if k.Current {
			src = receipt.KeyCurrent
		}
		out = append(out, receipt.Key{Public: k.PublicKey, Source: src})
	}
	return out, err
}
