package wtx

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

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
func unsafeState(path string, fi fs.FileInfo, why string) *Error {
	_, owner := ownerOf(fi)
	return &Error{Code: CodeStateUnsafe,
		Message: fmt.Sprintf("%s (owner %s, mode %s) %s: wtx keeps private records in its state root (edit texts, command lines, copies of files) and uses only one its owner alone controls",
			path, owner, unixMode(fi), why),
		Repairs: []Repair{
			{Action: "own", Detail: "use a state root of your own (WTX_STATE_DIR, XDG_STATE_HOME or HOME)"},
			{Action: "check", Detail: "see every entry that is not private", Command: "wtx fsck"},
		}}
}

// stateIOError gives an error from touching the state root its io.* code
// and says where it happened and what to do about it.
func stateIOError(stateDir, what string, err error) *Error {
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

// tighten makes the existing entry p private (perm at most want) if it is
// owned by the caller and looser than that. An entry owned by someone else
// is refused; one that cannot be tightened is refused when others can
// write it and reported with its io.* code otherwise.
func tighten(stateDir, p string, fi fs.FileInfo, want fs.FileMode) error {
	uid, _ := ownerOf(fi)
	if uid >= 0 && uid != os.Geteuid() {
		return unsafeState(p, fi, fmt.Sprintf("is not owned by you (uid %d)", os.Geteuid()))
	}
	extra := fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky
	if fi.Mode().Perm()&^want == 0 && fi.Mode()&extra == 0 {
		return nil
	}
	if err := os.Chmod(p, fi.Mode().Perm()&want); err != nil {
		if fi.Mode().Perm()&0o022 != 0 {
			return unsafeState(p, fi, fmt.Sprintf("is writable by others and cannot be made private (%v)", err))
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
	fi, err := os.Lstat(stateDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(filepath.Dir(stateDir), privateDirPerm); err != nil {
			return stateIOError(stateDir, "create the parent", err)
		}
		if err := os.Mkdir(stateDir, privateDirPerm); err != nil && !errors.Is(err, fs.ErrExist) {
			return stateIOError(stateDir, "create the state root", err)
		}
		if fi, err = os.Lstat(stateDir); err != nil {
			return stateIOError(stateDir, "create the state root", err)
		}
	case err != nil:
		return stateIOError(stateDir, "inspect the state root", err)
	}
	if !fi.IsDir() {
		return &Error{Code: CodeNotDir, Message: fmt.Sprintf("state root %s is not a directory", stateDir)}
	}
	if err := tighten(stateDir, stateDir, fi, privateDirPerm); err != nil {
		return err
	}
	if err := unix.Access(stateDir, unix.W_OK|unix.X_OK); err != nil {
		return stateIOError(stateDir, "write", err)
	}
	for _, name := range stateDirs {
		p := filepath.Join(stateDir, name)
		if err := os.Mkdir(p, privateDirPerm); err != nil && !errors.Is(err, fs.ErrExist) {
			return stateIOError(stateDir, "create "+name, err)
		}
		if err := tightenExisting(stateDir, p, privateDirPerm); err != nil {
			return err
		}
	}
	for _, name := range stateFiles {
		if err := tightenExisting(stateDir, filepath.Join(stateDir, name), privateFilePerm); err != nil {
			return err
		}
	}
	// The receipt key's directory is held to the same rule. The key itself
	// is not made private behind its owner's back: a key others could
	// read may have been copied, and signing refuses it (receiptkey.go).
	return tightenExisting(stateDir, filepath.Join(stateDir, keysDirName), privateDirPerm)
}

// tightenExisting is tighten for p if it exists.
func tightenExisting(stateDir, p string, want fs.FileMode) error {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return stateIOError(stateDir, "inspect "+p, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return unsafeState(p, fi, "is a symbolic link")
	}
	return tighten(stateDir, p, fi, want)
}

// createPrivateFile creates p empty with mode 0600 whatever the umask, if
// it does not exist yet. SQLite gives the database's -wal and -shm files
// the database file's mode, so they are private too.
func createPrivateFile(stateDir, p string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, privateFilePerm)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return stateIOError(stateDir, "create "+filepath.Base(p), err)
	}
	err = f.Chmod(privateFilePerm)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return stateIOError(stateDir, "create "+filepath.Base(p), err)
	}
	return nil
}

// ensurePrivateDir creates the directory p (0700 whatever the umask) or
// makes an existing one private.
func ensurePrivateDir(stateDir, p string) error {
	if err := os.Mkdir(p, privateDirPerm); err != nil && !errors.Is(err, fs.ErrExist) {
		return stateIOError(stateDir, "create "+p, err)
	}
	return tightenExisting(stateDir, p, privateDirPerm)
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
