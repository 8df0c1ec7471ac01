package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/answer"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/receipt"
)

// newReceiptKeyCommand is 'receipt key' and 'receipt key new'.
func newReceiptKeyCommand(g *globals) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "key [--all] | key new",
		Short: "Print the public key receipts are signed with (PEM); 'new' makes a new key",
		Long: `Print the public half of the state root's receipt key (PEM), to give to
whoever checks your receipts. --all prints every key the state root keeps:
the current one first, then the older ones receipts signed before a 'key
new' verify with.

The key is made once, with the state root (by the first command that uses
it). wtx never makes another on its own: a missing, damaged or unsafe key
is an error for every command that signs a receipt. 'wtx receipt key new'
makes a new one: whatever is in the old key's place is set aside into
keys/set-aside in the state root, and the old key's public half stays in
keys/public, so receipts signed with it still verify here; whoever checks
them elsewhere needs the old public key. A command run in a stage's
namespaces cannot see the keys directory.`,
		Example: `  wtx receipt key > wtx-receipt-key.pem
  wtx receipt key --all
  wtx receipt key new`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			dir, err := g.stateDir()
			if err != nil {
				return err
			}
			if all {
				return printReceiptKeys(g, dir)
			}
			pub, err := wtx.ReceiptPublicKeyOf(dir)
			if err != nil {
				return err
			}
			if g.json {
				return g.emit("receipt key", answer.ReceiptKey{KeyID: receipt.KeyID(pub), PublicKey: string(receipt.PublicKeyPEM(pub))})
			}
			_, err = g.io.Out.Write(receipt.PublicKeyPEM(pub))
			return err
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "print every key receipts of this state root verify with, the current one first")
	cmd.AddCommand(&cobra.Command{
		Use:   "new",
		Short: "Make a new receipt key; the old one's public half stays, so old receipts still verify",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			dir, err := g.stateDir()
			if err != nil {
				return err
			}
			ch, err := wtx.NewReceiptKey(dir)
			if err != nil {
				return err
			}
			pub, err := wtx.ReceiptPublicKeyOf(dir)
			if err != nil {
				return err
			}
			if g.json {
				return g.emit("receipt key new", answer.ReceiptKeyNew{KeyChange: ch, PublicKey: string(receipt.PublicKeyPEM(pub))})
			}
			fmt.Fprintf(g.io.Out, "new receipt key %s\n", ch.KeyID)
			if ch.Replaced != "" {
				fmt.Fprintf(g.io.Out, "it replaces %s: receipts signed with that key verify here with its public half, which the state root keeps; whoever checks them elsewhere needs that old public key ('wtx receipt key --all' prints it)\n", ch.Replaced)
			} else {
				fmt.Fprintln(g.io.Out, "the old key could not be read: receipts signed with it verify only with its public half, if the state root or someone who checks them kept it ('wtx receipt key --all' prints what the state root keeps)")
			}
			if ch.SetAside != "" {
				fmt.Fprintf(g.io.Out, "what was in the key's place is set aside: %s\n", quote.Path(ch.SetAside))
			}
			fmt.Fprintln(g.io.Out, "give whoever checks your receipts the new public key: wtx receipt key")
			return nil
		},
	})
	return cmd
}

// printReceiptKeys writes every key receipts of the state root dir verify
// with. A current key that cannot be used is said after them.
func printReceiptKeys(g *globals, dir string) error {
	keys, kerr := wtx.ReceiptKeys(dir)
	if kerr != nil && len(keys) == 0 {
		return kerr
	}
	if g.json {
		out := answer.ReceiptKeyList{Keys: []answer.ReceiptKeyEntry{}}
		for _, k := range keys {
			out.Keys = append(out.Keys, answer.ReceiptKeyEntry{KeyID: k.KeyID, PublicKey: string(receipt.PublicKeyPEM(k.PublicKey)), Current: k.Current})
		}
		if kerr != nil {
			return g.emitError("receipt key", wtx.AsError(kerr), 1, out)
		}
		return g.emit("receipt key", out)
	}
	for _, k := range keys {
		what := "retired"
		if k.Current {
			what = "current"
		}
		fmt.Fprintf(g.io.Out, "# %s (%s)\n%s", k.KeyID, what, receipt.PublicKeyPEM(k.PublicKey))
	}
	return kerr
}

// printVerified says what a verification checked.
func printVerified(w io.Writer, v *receipt.Verification) {
	src := map[receipt.KeySource]string{receipt.KeyGiven: "the key given", receipt.KeyCurrent: "your current key", receipt.KeyRetired: "an older key of yours, kept in the state root"}[v.KeySource]
	said := map[receipt.Check]string{
		receipt.CheckSignature:  "the signature over the whole statement",
		receipt.CheckStatement:  "the statement and envelope (nothing unknown)",
		receipt.CheckFields:     "every receipt field (none missing, none unknown)",
		receipt.CheckDigest:     "its digest",
		receipt.CheckSubjects:   "the statement's subjects",
		receipt.CheckDisclaimer: "the disclaimer entries its kind, backend, shared paths and containment require",
		receipt.CheckReadable:   "that the readable receipt beside the envelope is the signed one",
	}
	var parts []string
	for _, c := range v.Checked {
		parts = append(parts, said[c])
	}
	fmt.Fprintf(w, "receipt %s (%s) is valid: signed by %s (%s); checked: %s\n", v.Receipt.ID, v.Receipt.Kind, v.KeyID, src, strings.Join(parts, "; "))
}

// maxReceiptDoc bounds what receipt verify reads: a receipt is a few
// kilobytes, a --json answer with its envelope a few more.
const maxReceiptDoc = 64 << 20

// readReceiptDoc reads the document receipt verify checks (- for stdin),
// verifyReceiptDoc checks a receipt document with the public key in
// keyFile or, when keyFile is "", with the keys of the state root.
func verifyReceiptDoc(g *globals, data []byte, keyFile string) (*receipt.Verification, error) {
	if keyFile == "" {
		dir, err := g.stateDir()
		if err != nil {
			return nil, err
		}
		return wtx.VerifyReceipt(dir, data)
	}
	pem, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, wtx.AsError(err)
	}
	pub, err := receipt.ParsePublicKey(pem)
	if err != nil {
		return nil, wtx.AsError(err)
	}
	v, err := receipt.Verify(data, receipt.VerifyOptions{PublicKey: pub})
	return v, wtx.AsErrorOrNil(err)
}

// up to maxReceiptDoc bytes.
func readReceiptDoc(g *globals, name string) ([]byte, error) {
	r := g.io.In
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, wtx.AsError(err)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxReceiptDoc+1))
	if err != nil {
		return nil, wtx.AsError(err)
	}
	if len(data) > maxReceiptDoc {
		return nil, &wtx.Error{Code: wtx.CodeReceiptInvalid, Message: fmt.Sprintf("%s is larger than %d MiB: not a receipt", quote.Path(name), maxReceiptDoc>>20)}
	}
	return data, nil
}
