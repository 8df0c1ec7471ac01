package wtx

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/state"
)

// The state root holds edit texts, command lines and copies of workspace
// files: it and everything in it are private to its owner (I-004).
const (
	privateDirPerm  fs.FileMode = 0o700
	privateFilePerm fs.FileMode = 0o600
)

// Names in the state root.
const (
	dbName        = "wtx.db"
	stagesName    = "stages"
	workspaceDirs = "workspaces"
	objectsName   = "objects"
	blobTmpName   = "tmp"
	lostFoundName = "lost+found"
	probeCache    = "probe-cache.json"
)

// stateDirs are the directories directly under the state root.
var stateDirs = []string{stagesName, workspaceDirs, objectsName, blobTmpName}

// stateFiles are the files directly under the state root whose modes Open
// tightens when it finds them looser than private.
var stateFiles = []string{dbName, dbName + "-wal", dbName + "-shm", probeCache, "blobs.lock"}

// ownerOf describes the owner of fi for a message: "uid 1000 (alice)".
func ownerOf(fi fs.FileInfo) (uid int, desc string) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, "an unknown owner"
	}
	uid = int(st.Uid)
	desc = "uid " + strconv.Itoa(uid)
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		desc += " (" + u.Username + ")"
	}
	return uid, desc
}

// unixMode is fi's permission bits with setuid, setgid and sticky, as
// chmod writes them: "0755".
func unixMode(fi fs.FileInfo) string {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("%04o", st.Mode&0o7777)
	}
	return fmt.Sprintf("%04o", fi.Mode().Perm())
}

// unsafeState is the refusal of a state root (or an entry of it) that is
// not private to the caller.
func unsafeState(path string, st fsx.Stat, why string) *Error {
	owner := "uid " + strconv.Itoa(int(st.UID))
	if u, err := user.LookupId(strconv.Itoa(int(st.UID))); err == nil && u.Username != "" {
		owner += " (" + u.Username + ")"
	}
	mode := fmt.Sprintf("%04o", uint32(st.Mode.Perm())|extraBits(st.Mode))
	return &Error{Code: CodeStateUnsafe,
		Message: fmt.Sprintf("%s (owner %s, mode %s) %s: wtx keeps private records in its state root (edit texts, command lines, copies of files) and uses only one its owner alone controls",
			path, owner, mode, why),
		Repairs: []Repair{
			{Action: "own", Detail: "use a state root of your own (WTX_STATE_DIR, XDG_STATE_HOME or HOME)"},
			{Action: "check", Detail: "see every entry that is not private", Command: "wtx fsck"},
		}}
}

// extraBits is the setuid, setgid and sticky bits of m as chmod spells them.
func extraBits(m fs.FileMode) uint32 {
	var b uint32
	if m&fs.ModeSetuid != 0 {
		b |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		b |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}

// stateIOError gives an error from touching the state root its io.* code
// and says where it happened and what to do about it. A symlink, a mount
// point or an entry of the wrong type where wtx keeps its own file or
// directory is damage (io.corrupt): wtx never follows or replaces it.
func stateIOError(stateDir, what string, err error) *Error {
	if isStateDamage(err) {
		return &Error{Code: CodeCorrupt, Err: err,
			Message: fmt.Sprintf("%s in the state root %s: %v: something other than wtx put it there, and wtx neither follows nor replaces it", what, stateDir, err),
			Repairs: []Repair{
				{Action: "remove", Detail: "remove what is not wtx's (a symbolic link, a mount) from the state root, or restore the state root from a backup"},
				{Action: "check", Detail: "see what the state root holds", Command: "wtx fsck"},
			}}
	}
	e := AsError(fmt.Errorf("%s in the state root %s: %w", what, stateDir, err))
	switch e.Code {
	case CodeReadOnly:
		e.Repairs = append(e.Repairs, Repair{Action: "writable", Detail: "wtx records every command in its state root; point WTX_STATE_DIR at a writable directory or remount it read-write"})
	case CodePermission:
		e.Repairs = append(e.Repairs, Repair{Action: "permission", Detail: "wtx needs to write its state root; give its owner write access (chmod u+rwx) or point WTX_STATE_DIR at a directory of your own"})
	case CodeInternal:
		e.Code = CodeIO
	}
	return e
}

// isStateDamage reports whether err says a path of the state root met
// something wtx does not keep there: a symlink, a mount point, a file where
// a directory belongs or the other way round.
func isStateDamage(err error) bool {
	return errors.Is(err, fsx.ErrSymlink) || errors.Is(err, fsx.ErrCrossDevice) ||
		errors.Is(err, fsx.ErrNotDir) || errors.Is(err, fsx.ErrNotRegular) ||
		errors.Is(err, blob.ErrDamaged)
}

// tighten makes the existing entry rel of the state root private (perm at
// most want) if it is owned by the caller and looser than that. An entry
// owned by someone else is refused; one that cannot be tightened is
// refused when others can write it and reported with its io.* code
// otherwise.
func tighten(stateDir string, root *fsx.Root, rel string, st fsx.Stat, want fs.FileMode) error {
	p := filepath.Join(stateDir, rel)
	if int(st.UID) != os.Geteuid() {
		return unsafeState(p, st, fmt.Sprintf("is not owned by you (uid %d)", os.Geteuid()))
	}
	extra := fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky
	if st.Mode.Perm()&^want == 0 && st.Mode&extra == 0 {
		return nil
	}
	if err := root.Chmod(rel, st.Mode.Perm()&want); err != nil {
		if st.Mode.Perm()&0o022 != 0 {
			return unsafeState(p, st, fmt.Sprintf("is writable by others and cannot be made private (%v)", err))
		}
		return stateIOError(stateDir, "make "+p+" private", err)
	}
	return nil
}

// prepareStateRoot checks the state root and makes it private before
// anything is written in it (I-004): created 0700 if missing (whatever the
// umask), tightened if looser and owned by the caller, refused with
// precondition.state-unsafe if owned by someone else or writable by others
// beyond repair. Entries directly under it are checked the same way; what
// lies deeper is only reachable through them. A state root that cannot be
// written is reported as io.read-only or io.permission.
func prepareStateRoot(stateDir string) error {
	root, err := openStateRoot(stateDir)
	if err != nil {
		return err
	}
	_ = root.Close() // read-only handle
	return nil
}

// openStateRoot is prepareStateRoot that returns the state root open:
// every later path of it is resolved beneath this handle.
func openStateRoot(stateDir string) (*fsx.Root, error) {
	if err := makeStateRoot(stateDir); err != nil {
		return nil, err
	}
	root, err := fsx.OpenRoot(stateDir)
	switch {
	case errors.Is(err, fsx.ErrNotDir):
		return nil, &Error{Code: CodeNotDir, Message: fmt.Sprintf("state root %s is not a directory", stateDir)}
	case err != nil:
		return nil, stateIOError(stateDir, "open the state root", err)
	}
	if err := checkStateEntries(stateDir, root); err != nil {
		_ = root.Close() // read-only handle; the check's error is what counts
		return nil, err
	}
	return root, nil
}

// makeStateRoot creates the state root, and the directories above it,
// when it is missing. Its own path is the one wtx was given, resolved the
// ordinary way: the discipline of its entries starts beneath it.
func makeStateRoot(stateDir string) error {
	_, err := os.Lstat(stateDir)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return stateIOError(stateDir, "inspect the state root", err)
	}
	if err := os.MkdirAll(filepath.Dir(stateDir), privateDirPerm); err != nil {
		return stateIOError(stateDir, "create the parent", err)
	}
	if err := os.Mkdir(stateDir, privateDirPerm); err != nil && !errors.Is(err, fs.ErrExist) {
		return stateIOError(stateDir, "create the state root", err)
	}
	return nil
}

// checkStateEntries is prepareStateRoot's check of the state root root and
// of the entries directly under it.
func checkStateEntries(stateDir string, root *fsx.Root) error {
	st, err := root.Lstat(".")
	if err != nil {
		return stateIOError(stateDir, "inspect the state root", err)
	}
	if err := tighten(stateDir, root, ".", st, privateDirPerm); err != nil {
		return err
	}
	if err := unix.Access(stateDir, unix.W_OK|unix.X_OK); err != nil {
		return stateIOError(stateDir, "write", err)
	}
	for _, name := range stateDirs {
		if err := ensurePrivateDirAt(stateDir, root, name); err != nil {
			return err
		}
	}
	for _, name := range stateFiles {
		if err := tightenExisting(stateDir, root, name, privateFilePerm); err != nil {
			return err
		}
	}
	// The receipt key's directory is held to the same rule. The key itself
	// is not made private behind its owner's back: a key others could
	// read may have been copied, and signing refuses it (receiptkey.go).
	return tightenExisting(stateDir, root, keysDirName, privateDirPerm)
}

// tightenExisting is tighten for the entry rel of the state root if it
// exists. A symlink there is refused, never followed.
func tightenExisting(stateDir string, root *fsx.Root, rel string, want fs.FileMode) error {
	st, err := root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return stateIOError(stateDir, "inspect "+filepath.Join(stateDir, rel), err)
	}
	if st.IsSymlink() {
		return unsafeState(filepath.Join(stateDir, rel), st, "is a symbolic link")
	}
	return tighten(stateDir, root, rel, st, want)
}

// stateRel is p's path beneath stateDir, refused unless p lies beneath it.
func stateRel(stateDir, p string) (string, error) {
	rel, err := filepath.Rel(stateDir, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || fsx.ValidRel(rel) != nil {
		return "", &Error{Code: CodeInternal, Message: fmt.Sprintf("%s is not beneath the state root %s", p, stateDir)}
	}
	return rel, nil
}

// createPrivateFile creates p, beneath stateDir, empty with mode 0600
// whatever the umask, if it does not exist yet. SQLite gives the
// database's -wal and -shm files the database file's mode, so they are
// private too.
func createPrivateFile(stateDir, p string) error {
	return atStateRel(stateDir, p, createPrivateFileAt)
}

// atStateRel runs fn on p's path beneath the state root stateDir, opened
// for it.
func atStateRel(stateDir, p string, fn func(stateDir string, root *fsx.Root, rel string) error) error {
	root, err := fsx.OpenRoot(stateDir)
	if err != nil {
		return stateIOError(stateDir, "open the state root", err)
	}
	defer root.Close()
	rel, err := stateRel(stateDir, p)
	if err != nil {
		return err
	}
	return fn(stateDir, root, rel)
}

// createPrivateFileAt is createPrivateFile for the rel path rel of the open
// state root.
func createPrivateFileAt(stateDir string, root *fsx.Root, rel string) error {
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, privateFilePerm)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return stateIOError(stateDir, "create "+rel, err)
	}
	err = f.Chmod(privateFilePerm)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return stateIOError(stateDir, "create "+rel, err)
	}
	return nil
}

// ensurePrivateDir creates the directory p beneath stateDir (0700 whatever
// the umask) or makes an existing one private.
func ensurePrivateDir(stateDir, p string) error {
	return atStateRel(stateDir, p, ensurePrivateDirAt)
}

// ensurePrivateDirAt is ensurePrivateDir for the rel path rel of the open
// state root. Directories missing above it are made too.
func ensurePrivateDirAt(stateDir string, root *fsx.Root, rel string) error {
	st, err := root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		d, err := root.MkdirAll(rel, privateDirPerm)
		if err != nil {
			return stateIOError(stateDir, "create "+filepath.Join(stateDir, rel), err)
		}
		return d.Close()
	}
	if err != nil {
		return stateIOError(stateDir, "inspect "+filepath.Join(stateDir, rel), err)
	}
	if st.IsSymlink() {
		return unsafeState(filepath.Join(stateDir, rel), st, "is a symbolic link")
	}
	if !st.IsDir() {
		return stateIOError(stateDir, "use "+filepath.Join(stateDir, rel), &fs.PathError{Op: "open", Path: rel, Err: fsx.ErrNotDir})
	}
	return tighten(stateDir, root, rel, st, privateDirPerm)
}

// stateDBError gives an error from opening the state database its code:
// io.read-only or io.permission when the file cannot be written, io.corrupt
// when it is damaged or not a wtx database.
func stateDBError(stateDir string, err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	switch {
	case errors.Is(err, state.ErrReadOnly), errors.Is(err, state.ErrCantOpen):
		// SQLite does not say why; the file system does.
		dbPath := filepath.Join(stateDir, dbName)
		for _, p := range []string{dbPath, dbPath + "-wal", dbPath + "-shm", stateDir} {
			if aerr := unix.Access(p, unix.W_OK); aerr != nil && !errors.Is(aerr, fs.ErrNotExist) {
				return stateIOError(stateDir, "write "+filepath.Base(p), errors.Join(err, aerr))
			}
		}
		if errors.Is(err, state.ErrReadOnly) {
			return stateIOError(stateDir, "write the database", errors.Join(err, syscall.EROFS))
		}
	case errors.Is(err, state.ErrForeign), errors.Is(err, state.ErrCorrupt):
		return &Error{Code: CodeCorrupt, Err: err,
			Message: fmt.Sprintf("the state database %s is damaged or not a wtx database (%v): wtx will not overwrite it", filepath.Join(stateDir, dbName), err),
			Repairs: dbRepairs(stateDir)}
	case errors.Is(err, state.ErrTooNew):
		return &Error{Code: CodeUnsupported, Err: err, Message: err.Error() + ": use a newer wtx"}
	}
	return stateIOError(stateDir, "open the database", err)
}

// dbRepairs are the ways out of a missing or damaged state database.
func dbRepairs(stateDir string) []Repair {
	return []Repair{
		{Action: "restore", Detail: fmt.Sprintf("put back %s (and its -wal file) from a backup", filepath.Join(stateDir, dbName))},
		{Action: "check", Detail: "see what the state root still holds", Command: "wtx fsck"},
		{Action: "reinit", Detail: "set the damaged database and what depended on it aside (into " + lostFoundName + " in the state root) and start an empty history", Command: "wtx fsck --reinit"},
	}
}
