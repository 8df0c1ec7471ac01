package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/answer"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/quote"
)

// The directories whose workspace boundary and project file the user
// trusts whoever owns them (wtx.Options.SafeDirectories, T-004), as git's
// safe.directory: kept one a line in a file of the user's configuration,
// which 'wtx safe-directory' edits, and added to from WTX_SAFE_DIRECTORIES
// (a list like PATH), for a container or a CI job whose home is thrown
// away. Both are the caller's own: neither lies in a directory a workspace
// controls.

// safeDirsEnv names the environment variable with more safe directories.
const safeDirsEnv = "WTX_SAFE_DIRECTORIES"

// maxSafeDirsFile bounds the file: it holds a few paths.
const maxSafeDirsFile = 1 << 20

// safeDirsFile is where the list is kept: $XDG_CONFIG_HOME/wtx/safe-directories,
// else ~/.config/wtx/safe-directories ("" without a home).
func (g *globals) safeDirsFile() string {
	if d := g.getenv("XDG_CONFIG_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "wtx", "safe-directories")
	}
	if h := g.home(); h != "" {
		return filepath.Join(h, ".config", "wtx", "safe-directories")
	}
	return ""
}

// readSafeDirs returns the entries of the file (none when it does not
// exist) and its lines as they are, comments included. The file must be
// the caller's or root's and writable by no one else: it widens whom wtx
// obeys, so one that another user could have written is refused.
func readSafeDirs(p string) (entries, lines []string, err error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, &wtx.Error{Code: wtx.CodeUsage, Message: fmt.Sprintf("safe-directories file %s: %v", quote.Path(p), err), Err: err}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, wtx.AsError(err)
	}
	if err := checkSafeDirsOwner(p, fi); err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, &wtx.Error{Code: wtx.CodeUsage, Message: fmt.Sprintf("safe-directories file %s is not a regular file", quote.Path(p))}
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSafeDirsFile+1))
	if err != nil {
		return nil, nil, &wtx.Error{Code: wtx.CodeUsage, Message: fmt.Sprintf("safe-directories file %s: %v", quote.Path(p), err), Err: err}
	}
	if len(data) > maxSafeDirsFile {
		return nil, nil, &wtx.Error{Code: wtx.CodeUsage, Message: fmt.Sprintf("safe-directories file %s is larger than %d bytes", quote.Path(p), maxSafeDirsFile)}
	}
	lines = strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(data) == 0 {
		lines = nil
	}
	for _, l := range lines {
		if e := strings.TrimSuffix(l, "\r"); e != "" && !strings.HasPrefix(e, "#") {
			entries = append(entries, e)
		}
	}
	return entries, lines, nil
}

// checkSafeDirsOwner refuses a safe-directories file that someone other
// than the caller or root owns, or that its group or every user may write.
func checkSafeDirsOwner(p string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || failpoint.Disabled("untrusted-owner") {
		return nil
	}
	var why string
	var fix wtx.Repair
	switch {
	case int(st.Uid) != os.Geteuid() && st.Uid != 0:
		why = fmt.Sprintf("is owned by uid %d, not by you (uid %d) or root", st.Uid, os.Geteuid())
		fix = wtx.Repair{Action: "own", Detail: "keep your own: point XDG_CONFIG_HOME or HOME at your own directory, or remove the file"}
	case st.Mode&0o022 != 0:
		why = fmt.Sprintf("is writable by its group or every user (mode %04o)", st.Mode&0o7777)
		fix = wtx.Repair{Action: "own", Detail: "let no one else write it", Command: "chmod go-w " + quote.Shell(p)}
	default:
		return nil
	}
	return &wtx.Error{Code: wtx.CodeUntrustedOwner,
		Message: fmt.Sprintf("refusing the safe-directories file %s: it %s; it says whose workspaces wtx obeys, so only you may write it", quote.Path(p), why),
		Repairs: []wtx.Repair{fix}}
}

// trustOptions are the caller's trust settings for wtx.Options: the
// entries of the file and of WTX_SAFE_DIRECTORIES, and, for root, the user
// sudo runs it for.
func (g *globals) trustOptions() (safe []string, sudo int, err error) {
	if p := g.safeDirsFile(); p != "" {
		if safe, _, err = readSafeDirs(p); err != nil {
			return nil, 0, err
		}
	}
	for _, e := range filepath.SplitList(g.getenv(safeDirsEnv)) {
		if e != "" {
			safe = append(safe, e)
		}
	}
	if os.Geteuid() == 0 {
		if n, err := strconv.Atoi(g.getenv("SUDO_UID")); err == nil && n > 0 {
			sudo = n
		}
	}
	return safe, sudo, nil
}

// trustHints renders an untrusted-owner refusal's trust repair as the
// command that adds the directory, and names the variable.
func trustHints(e *wtx.Error) *wtx.Error {
	if e.Code != wtx.CodeUntrustedOwner {
		return e
	}
	out := *e
	out.Repairs = slices.Clone(e.Repairs)
	for i, r := range out.Repairs {
		if r.Action == wtx.RepairTrust && len(r.Paths) == 1 && r.Command == "" {
			out.Repairs[i].Detail = r.Detail + " (or, for one command, add it to " + safeDirsEnv + ")"
			out.Repairs[i].Command = "wtx safe-directory add " + quote.Shell(r.Paths[0])
		}
	}
	return &out
}

func newSafeDirectoryCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "safe-directory",
		Short: "Trust a directory whoever owns its .git or .wtx.toml",
		Long: `wtx obeys a workspace boundary it finds above where it was started (.git,
.wtx.toml) and a workspace's project file (.wtx.toml) only when they and their
directory belong to you or root, and when not every user may write the file or
replace it. Another user's would choose your workspace and your stages'
backend, excludes and protects; such a boundary or file is refused
(precondition.untrusted-owner), as git refuses a repository another user owns.

To work in such a directory anyway, trust it. The list is kept in
$XDG_CONFIG_HOME/wtx/safe-directories (else ~/.config/wtx/safe-directories),
one entry a line; WTX_SAFE_DIRECTORIES adds entries for one command (separated
by ':'). An entry is a directory (exactly that one), a directory followed by
"/*" (it and every directory below it), or "*" (every directory).`,
		Example: `  wtx safe-directory add /srv/shared/project
  wtx safe-directory add '/srv/checkouts/*'
  WTX_SAFE_DIRECTORIES=/srv/ci/build wtx run -- make
  wtx safe-directory list`,
	}
	cmd.AddCommand(newSafeDirAddCommand(g), newSafeDirRemoveCommand(g), newSafeDirListCommand(g))
	return cmd
}

// safeDirEntry turns an argument into the entry it stands for: "*" as it
// is, else an absolute canonical directory, with "/*" kept.
func safeDirEntry(arg string) (string, error) {
	if arg == wtx.SafeAll {
		return arg, nil
	}
	if strings.ContainsAny(arg, "\n\r") || strings.IndexByte(arg, 0) >= 0 {
		return "", usageError{msg: fmt.Sprintf("safe directory %s: a name with a line break cannot be kept one a line", quote.Path(arg))}
	}
	dir, below := strings.CutSuffix(arg, "/*")
	if below && dir == "" {
		dir = "/"
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", wtx.AsError(err)
	}
	c, err := filepath.EvalSymlinks(abs)
	switch {
	case err == nil:
	case below && errors.Is(err, fs.ErrNotExist):
		c = abs
	default:
		return "", &wtx.Error{Code: wtx.CodeNotDir, Message: fmt.Sprintf("safe directory %s: %v", quote.Path(arg), err), Err: err}
	}
	if fi, err := os.Stat(c); err == nil && !fi.IsDir() {
		return "", &wtx.Error{Code: wtx.CodeNotDir, Message: fmt.Sprintf("safe directory %s is not a directory", quote.Path(c))}
	}
	if below {
		c = strings.TrimSuffix(c, "/") + "/*"
	}
	return c, nil
}

// editSafeDirs rewrites the file with edit applied to its lines.
func (g *globals) editSafeDirs(edit func(lines []string) []string) (string, []string, error) {
	p := g.safeDirsFile()
	if p == "" {
		return "", nil, &wtx.Error{Code: wtx.CodeUsage, Message: "cannot find where to keep safe directories: set XDG_CONFIG_HOME or HOME"}
	}
	_, lines, err := readSafeDirs(p)
	if err != nil {
		return p, nil, err
	}
	lines = edit(lines)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return p, nil, wtx.AsError(err)
	}
	data := ""
	if len(lines) > 0 {
		data = strings.Join(lines, "\n") + "\n"
	}
	if err := fsx.WriteFileAtomic(p, []byte(data), 0o600); err != nil {
		return p, nil, wtx.AsError(err)
	}
	entries, _, err := readSafeDirs(p)
	return p, entries, err
}

func newSafeDirAddCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "add DIR",
		Short: "Trust DIR (DIR/* for everything below it, * for every directory)",
		Args:  exactlyOne("directory"),
		RunE: func(c *cobra.Command, args []string) error {
			entry, err := safeDirEntry(args[0])
			if err != nil {
				return err
			}
			had := false
			p, entries, err := g.editSafeDirs(func(lines []string) []string {
				if had = slices.Contains(lines, entry); had {
					return lines
				}
				return append(lines, entry)
			})
			if err != nil {
				return err
			}
			return g.answerSafeDirs("safe-directory add", p, entries, entry, had, "trusted")
		},
	}
}

func newSafeDirRemoveCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "remove DIR",
		Short: "Trust DIR no more",
		Args:  exactlyOne("directory"),
		RunE: func(c *cobra.Command, args []string) error {
			entry := args[0]
			if e, err := safeDirEntry(args[0]); err == nil {
				entry = e
			}
			found := false
			p, entries, err := g.editSafeDirs(func(lines []string) []string {
				out := lines[:0]
				for _, l := range lines {
					if l == entry || l == args[0] {
						found = true
						continue
					}
					out = append(out, l)
				}
				return out
			})
			if err != nil {
				return err
			}
			if !found {
				return &wtx.Error{Code: wtx.CodeUsage, Message: fmt.Sprintf("%s is not in the safe-directories file %s", quote.Path(entry), quote.Path(p))}
			}
			return g.answerSafeDirs("safe-directory remove", p, entries, entry, false, "no longer trusted")
		},
	}
}

func newSafeDirListCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the trusted directories, from the file and WTX_SAFE_DIRECTORIES",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			p := g.safeDirsFile()
			var entries []string
			if p != "" {
				var err error
				if entries, _, err = readSafeDirs(p); err != nil {
					return err
				}
			}
			return g.answerSafeDirs("safe-directory list", p, entries, "", false, "")
		},
	}
}

// answerSafeDirs answers the safe-directory commands: what changed, the
// file's entries and the environment's.
func (g *globals) answerSafeDirs(command, file string, entries []string, entry string, had bool, did string) error {
	var env []string
	for _, e := range filepath.SplitList(g.getenv(safeDirsEnv)) {
		if e != "" {
			env = append(env, e)
		}
	}
	if g.json {
		return g.emit(command, answer.NewSafeDirectories(file, entries, env, entry, had))
	}
	switch {
	case had:
		g.notice("wtx: %s is trusted already (%s)", quote.Path(entry), quote.Path(file))
	case entry != "":
		g.notice("wtx: %s %s (%s)", quote.Path(entry), did, quote.Path(file))
	default:
		for _, e := range entries {
			fmt.Fprintln(g.io.Out, quote.Text(e))
		}
		for _, e := range env {
			fmt.Fprintln(g.io.Out, quote.Text(e)+"\t("+safeDirsEnv+")")
		}
	}
	return nil
}
