package cli

import (
	"crypto/ed25519"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/answer"
	"github.com/wtx-dev/wtx/receipt"
)

// newReceiptTrustCommand is 'wtx receipt trust': the keys whose signed
// receipts an import counts as trusted.
func newReceiptTrustCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trust (add KEY|FILE | list | remove KEYID|NAME)",
		Short: "Keep the list of public keys whose signed change sets you trust on import",
		Long: `The trust file lists the ed25519 public keys whose signatures 'wtx import'
counts as trusted, as git's gpg.ssh.allowedSignersFile does for commits.
An imported change set is always checked against the signed receipts it
carries; the import then says which key signed it and whether you trust
that key, and 'import --require-trusted' refuses any other. This state root's
receipt key is trusted without a line; a key 'receipt key new' replaced
still verifies what it signed but is trusted only by a line. The file lives in the state root
('trusted-keys', private to you), one key a line:
"ed25519 <base64> [name]". Add a key only once you know whose it is (ask
them for 'wtx receipt key' over a channel you trust).`,
		Example: `  wtx receipt key > mine.pem                       # on the signer's machine
  wtx receipt trust add mine.pem --name alice@laptop   # on yours
  wtx receipt trust list
  wtx receipt trust remove alice@laptop`,
	}
	var name string
	add := &cobra.Command{
		Use:   "add KEY|FILE",
		Short: "Trust a public key: a PEM file (- for stdin) or the key's text",
		Args:  exactlyOne("key or file"),
		RunE: func(c *cobra.Command, args []string) error {
			data, err := trustKeyInput(g, args[0])
			if err != nil {
				return err
			}
			pub, lineName, err := wtx.ParseTrustKey(data)
			if err != nil {
				return err
			}
			if name == "" {
				name = lineName
			}
			dir, err := g.stateDir()
			if err != nil {
				return err
			}
			k, added, err := wtx.AddTrustedKey(dir, pub, name)
			if err != nil {
				return err
			}
			if g.json {
				return g.emit("receipt trust add", answer.TrustChange{File: wtx.TrustFilePath(dir), Added: added, Keys: []answer.TrustedKey{trustedAnswer(k)}})
			}
			verb := "now trusted"
			if !added {
				verb = "trusted already"
			}
			fmt.Fprintf(g.io.Out, "%s %s\n", k.KeyID, k.Name)
			g.notice("wtx: key %s is %s: an import whose change set it signed says so, and --require-trusted takes it", k.KeyID, verb)
			return nil
		},
	}
	add.Flags().StringVar(&name, "name", "", "a `NAME` for the key (whose it is), shown on import")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the trusted keys",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			dir, err := g.stateDir()
			if err != nil {
				return err
			}
			keys, err := wtx.LoadTrust(dir)
			if err != nil {
				return err
			}
			own := ""
			if pub, err := wtx.ExistingReceiptPublicKey(dir); err == nil && pub != nil {
				own = receipt.KeyID(pub)
			}
			if g.json {
				l := answer.TrustList{File: wtx.TrustFilePath(dir), Keys: []answer.TrustedKey{}, OwnKeyID: own}
				for _, k := range keys {
					l.Keys = append(l.Keys, trustedAnswer(k))
				}
				return g.emit("receipt trust list", l)
			}
			for _, k := range keys {
				fmt.Fprintf(g.io.Out, "%s %s\n", k.KeyID, k.Name)
			}
			if own != "" {
				g.notice("wtx: your own receipt key %s is trusted too", own)
			}
			if len(keys) == 0 {
				g.notice("wtx: the trust file %s lists no key", wtx.TrustFilePath(dir))
			}
			return nil
		},
	}
	remove := &cobra.Command{
		Use:   "remove KEYID|NAME",
		Short: "Stop trusting a key (by key id, a prefix of at least 8 hex digits, or name)",
		Args:  exactlyOne("key id or name"),
		RunE: func(c *cobra.Command, args []string) error {
			dir, err := g.stateDir()
			if err != nil {
				return err
			}
			removed, err := wtx.RemoveTrustedKey(dir, args[0])
			if err != nil {
				return err
			}
			if g.json {
				ch := answer.TrustChange{File: wtx.TrustFilePath(dir), Removed: true, Keys: []answer.TrustedKey{}}
				for _, k := range removed {
					ch.Keys = append(ch.Keys, trustedAnswer(k))
				}
				return g.emit("receipt trust remove", ch)
			}
			for _, k := range removed {
				fmt.Fprintf(g.io.Out, "%s %s\n", k.KeyID, k.Name)
				g.notice("wtx: key %s is no longer trusted", k.KeyID)
			}
			return nil
		},
	}
	cmd.AddCommand(add, list, remove)
	return cmd
}

// trustKeyInput reads what 'trust add' was given: stdin for "-", the
// file when arg names one, else arg itself (the key's text).
func trustKeyInput(g *globals, arg string) ([]byte, error) {
	if arg == "-" {
		data, err := io.ReadAll(io.LimitReader(g.io.In, 64<<10))
		return data, wtx.AsErrorOrNil(err)
	}
	if fi, err := os.Stat(arg); err == nil && fi.Mode().IsRegular() {
		f, err := os.Open(arg)
		if err != nil {
			return nil, wtx.AsError(err)
		}
		defer f.Close()
		data, err := io.ReadAll(io.LimitReader(f, 64<<10))
		return data, wtx.AsErrorOrNil(err)
	}
	return []byte(arg), nil
}

func trustedAnswer(k wtx.TrustedKey) answer.TrustedKey {
	return answer.TrustedKey{KeyID: k.KeyID, Name: k.Name, PublicKey: string(receipt.PublicKeyPEM(ed25519.PublicKey(k.PublicKey)))}
}
