// Package receipt is wtx's receipt: the durable record of a run, an apply,
// an undo or an export, its wire form, and how to sign and verify it.
//
// A receipt ([Receipt]) says what a command did to a workspace: the tree
// it started from and the one it left (their digests), the change set, the
// command, who acted, and what no stage covers (its not_transactional
// list). Its Digest covers every other field. A signed receipt is an
// in-toto Statement v1 ([Statement]) whose predicate is the receipt, in a
// DSSE envelope ([Envelope]) signed with an ed25519 key.
//
// [Verify] checks a receipt document as wtx prints it: a signed envelope,
// a --json answer carrying one, or a bare receipt. A verifier needs only
// this package and the signer's public key ([ParsePublicKey] reads the
// PEM form that [PublicKeyPEM] writes); it does not need a workspace or
// wtx's engine. Every refusal is an [*Error]: errors.Is tells its class
// ([ErrInvalid], [ErrSignature], [ErrUnsigned], [ErrKey]) and Error.Check
// names the check that refused.
//
// Where keys are kept, which keys are trusted, and writing receipts into
// a workspace's history belong to package wtx, which uses this one.
package receipt
