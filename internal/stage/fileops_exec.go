package stage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/wtx-dev/wtx/internal/fsx"
)

// fileOpArg and fileOpEnv mark a re-execution of the binary that performs
// one per-file operation inside a view that exists only in a namespace.
const (
	fileOpArg = "__stage-fileop"
	fileOpEnv = "WTX_STAGE_FILEOP"
)

// Exit statuses of a per-file operation, so the caller can map them back.
const (
	fileOpOK = iota
	fileOpFailed
	fileOpSymlink
	fileOpIsDir
	fileOpNotExist
	fileOpNotRegular
	fileOpNotEmpty
	fileOpNoParent
)

// fileOpMain performs "write REL PERM TMP-PREFIX DIR-PERM" (content on stdin) or "rm REL" in
// the current directory, which Prepare made the view's root.
func fileOpMain(args []string) int {
	dir, err := os.Getwd()
	if err == nil {
		switch {
		case len(args) == 5 && args[0] == "write":
			var perm, dirPerm uint64
			perm, err = strconv.ParseUint(args[2], 8, 32)
			if err == nil {
				dirPerm, err = strconv.ParseUint(args[4], 8, 32)
			}
			if err == nil {
				err = checkTempPrefix(args[3])
			}
			if err == nil {
				var data []byte
				if data, err = io.ReadAll(os.Stdin); err == nil {
					err = writeInTree(dir, args[1], args[3], data, fs.FileMode(perm), fs.FileMode(dirPerm))
				}
			}
		case len(args) == 2 && args[0] == "rm":
			err = removeInTree(dir, args[1])
		case len(args) == 1 && args[0] == "restore":
			err = restoreMain()
		case len(args) == 1 && args[0] == "materialize":
			err = materializeMain()
		default:
			err = fmt.Errorf("usage: %s write REL PERM TMP-PREFIX DIR-PERM | rm REL | restore | materialize", fileOpArg)
		}
	}
	if err == nil {
		return fileOpOK
	}
	fmt.Fprintln(os.Stderr, err)
	switch {
	case errors.Is(err, fsx.ErrSymlink):
		return fileOpSymlink
	case errors.Is(err, ErrIsDir):
		return fileOpIsDir
	case errors.Is(err, fs.ErrNotExist):
		return fileOpNotExist
	case errors.Is(err, fsx.ErrNotRegular):
		return fileOpNotRegular
	case errors.Is(err, ErrNotEmpty):
		return fileOpNotEmpty
	case errors.Is(err, ErrNoParent):
		return fileOpNoParent
	}
	return fileOpFailed
}

// ExecFileOps gives per-file operations to a view whose tree exists only
// inside a namespace: each operation re-executes this binary in the view
// (through Prepare) to do it there.
func ExecFileOps(v View) FileOps { return execFileOps{v} }

var _ FileOps = execFileOps{}

type execFileOps struct{ v View }

func (e execFileOps) run(ctx context.Context, stdin []byte, args ...string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("per-file operation: find this program: %w", err)
	}
	cmd := exec.CommandContext(ctx, self, append([]string{fileOpArg}, args...)...)
	cmd.Env = append(os.Environ(), fileOpEnv+"=1")
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := e.v.Prepare(cmd, RunOptions{}); err != nil {
		return err
	}
	untie := tieToCaller(cmd)
	if err = startHelper(cmd); err == nil {
		err = cmd.Wait()
	}
	untie()
	if err == nil {
		return nil
	}
	msg := strings.TrimSpace(stderr.String())
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		rel := args[1]
		switch ee.ExitCode() {
		case fileOpSymlink:
			return fmt.Errorf("%s %s: %s: %w", args[0], rel, msg, fsx.ErrSymlink)
		case fileOpIsDir:
			return fmt.Errorf("%s %s: %w", args[0], rel, ErrIsDir)
		case fileOpNotExist:
			return &fs.PathError{Op: args[0], Path: rel, Err: fs.ErrNotExist}
		case fileOpNotRegular:
			return fmt.Errorf("%s %s: %w", args[0], rel, fsx.ErrNotRegular)
		}
	}
	return fmt.Errorf("%s %s in the view: %v: %s", args[0], args[1], err, msg)
}

func (e execFileOps) WriteFile(ctx context.Context, rel string, data []byte, perm fs.FileMode) error {
	return e.WriteFileTemp(ctx, rel, opTempPrefix, data, perm, 0)
}

func (e execFileOps) WriteFileTemp(ctx context.Context, rel, tmpPrefix string, data []byte, perm, dirPerm fs.FileMode) error {
	if err := checkTempPrefix(tmpPrefix); err != nil {
		return err
	}
	return e.run(ctx, data, "write", rel, strconv.FormatUint(uint64(perm.Perm()), 8), tmpPrefix, strconv.FormatUint(uint64(dirPerm.Perm()), 8))
}

func (e execFileOps) Remove(ctx context.Context, rel string) error {
	return e.run(ctx, nil, "rm", rel)
}
