package wtx

// The project file, .wtx.toml at the workspace root, holds the defaults
// every new stage of the workspace gets (excludes, protects, backend), as
// .gitignore is for git. Begin reads it whenever a stage opens, whichever
// way (begin, run, batch, import, a flow step, the MCP server), unless
// BeginOptions.NoProject says otherwise; the file itself is protected by
// default, like .git. A file someone else controls is not obeyed (T-004,
// trust.go).

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/pelletier/go-toml/v2"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/tree"
)

// ProjectFileName is the project file's name at the workspace root.
const ProjectFileName = ".wtx.toml"

// maxSize bounds the file: it holds a few lists of selectors.
const maxSize = 1 << 20

// ProjectBackends are the values the project file's backend may take.
var ProjectBackends = []string{"auto", "overlay", "clone", "copy"}

// ProjectFile is a parsed project file.
type ProjectFile struct {
	// Path is the file's absolute path.
	Path string `json:"path"`
	// Backend is the default staging backend, or "" when the file sets none.
	Backend string `json:"backend,omitempty"`
	// Exclude and Protect are selectors every new stage gets, before the
	// ones given on its command line. Each is a byte string, taken as it is.
	Exclude []string `json:"exclude"`
	Protect []string `json:"protect"`
}

// raw is the file's schema: every key it may hold. Anything else is an
// error (a misspelt key must not be ignored silently).
type projectRaw struct {
	Backend *string  `toml:"backend"`
	Exclude []string `toml:"exclude"`
	Protect []string `toml:"protect"`
}

// LoadProject reads root/.wtx.toml. It returns nil and no error when there is no
// such file. A file wtx cannot use (not a regular file, unreadable, not
// TOML, an unknown key, a value of the wrong type, a backend it does not
// know, a selector that is not one: empty, absolute, with a NUL byte, an
// empty, "." or ".." component, or a bad pattern) is an error with code
// usage.project-file that names the line. It reads the file whoever owns
// it; Workspace.Project reads it as Begin obeys it, owner checked.
func LoadProject(root string) (*ProjectFile, error) {
	return loadProject(root, nil)
}

// Project reads the workspace's project file as every new stage obeys it
// (nil and no error when there is none): as LoadProject, and refused as
// precondition.untrusted-owner when the file or the workspace directory
// is owned by someone other than the caller or root, or when every user
// may write the file or replace it, unless the caller trusts the
// workspace (Options.SafeDirectories) (T-004).
//
// The file is reached beneath the workspace's root, opened and checked to
// be the directory Open found (openRoot), never by its path: the gate
// reads it in the middle of an apply.
func (w *Workspace) Project() (*ProjectFile, error) {
	root, err := w.openRoot()
	if err != nil {
		return nil, AsError(err)
	}
	defer root.Close()
	p := filepath.Join(w.path, ProjectFileName)
	f, err := root.OpenFile(ProjectFileName, os.O_RDONLY, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case errors.Is(err, fsx.ErrSymlink):
		return nil, projectFileError(p, 0, "is a symbolic link; the project file must be a regular file at the workspace root")
	case errors.Is(err, fsx.ErrCrossDevice):
		return nil, projectFileError(p, 0, "is mounted from another file system; the project file must be a regular file of the workspace")
	case errors.Is(err, fsx.ErrNotRegular):
		return nil, projectFileError(p, 0, "is not a regular file")
	case err != nil:
		return nil, &Error{Code: CodeProjectFile, Message: fmt.Sprintf("project file %s: %v", quote.Path(p), err), Err: err}
	}
	defer f.Close()
	return readProject(p, f, func(p string, fi fs.FileInfo) error { return w.trust.checkProject(w.path, p, fi) })
}

// loadProject is LoadProject with check run on the opened file before it
// is read.
func loadProject(root string, check func(p string, fi fs.FileInfo) error) (*ProjectFile, error) {
	p := filepath.Join(root, ProjectFileName)
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, projectFileError(p, 0, "is a symbolic link; the project file must be a regular file at the workspace root")
		}
		return nil, &Error{Code: CodeProjectFile, Message: fmt.Sprintf("project file %s: %v", quote.Path(p), err), Err: err}
	}
	defer f.Close()
	return readProject(p, f, check)
}

// readProject reads the project file p open as f, with check run on it
// before it is read.
func readProject(p string, f *os.File, check func(p string, fi fs.FileInfo) error) (*ProjectFile, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, AsError(err)
	}
	if check != nil {
		if err := check(p, fi); err != nil {
			return nil, err
		}
	}
	if !fi.Mode().IsRegular() {
		return nil, projectFileError(p, 0, "is not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSize+1))
	if err != nil {
		return nil, &Error{Code: CodeProjectFile, Message: fmt.Sprintf("project file %s: %v", quote.Path(p), err), Err: err}
	}
	if len(data) > maxSize {
		return nil, projectFileError(p, 0, fmt.Sprintf("is larger than %d bytes", maxSize))
	}
	return ParseProject(p, data)
}

// ParseProject parses the contents of the project file at path p.
func ParseProject(p string, data []byte) (*ProjectFile, error) {
	var r projectRaw
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, _ := de.Position()
			msg := strings.TrimPrefix(de.Error(), "toml: ")
			if k := de.Key(); len(k) > 0 && strings.Contains(msg, "unknown field") {
				msg = fmt.Sprintf("unknown key %q (known: backend, exclude, protect)", strings.Join(k, "."))
			}
			return nil, projectFileError(p, row, msg)
		}
		return nil, projectFileError(p, 0, strings.TrimPrefix(err.Error(), "toml: "))
	}
	f := &ProjectFile{Path: p, Exclude: r.Exclude, Protect: r.Protect}
	if f.Exclude == nil {
		f.Exclude = []string{}
	}
	if f.Protect == nil {
		f.Protect = []string{}
	}
	if r.Backend != nil {
		ok := false
		for _, b := range ProjectBackends {
			ok = ok || *r.Backend == b
		}
		if !ok {
			return nil, projectFileError(p, projectLineOf(data, "backend"), fmt.Sprintf("backend %q is not one of %s", *r.Backend, strings.Join(ProjectBackends, ", ")))
		}
		f.Backend = *r.Backend
	}
	for _, l := range []struct {
		key  string
		sels []string
	}{{"exclude", f.Exclude}, {"protect", f.Protect}} {
		for _, s := range l.sels {
			switch {
			case s == "":
				return nil, projectFileError(p, projectLineOf(data, l.key), l.key+" holds an empty selector")
			case strings.IndexByte(s, 0) >= 0:
				return nil, projectFileError(p, projectLineOf(data, l.key), fmt.Sprintf("%s selector %s holds a NUL byte, which no name can", l.key, quote.Path(s)))
			}
			if _, err := tree.ParseSelector(s); err != nil {
				return nil, projectFileError(p, selectorLineOf(data, l.key, s), l.key+" "+err.Error())
			}
		}
	}
	return f, nil
}

// projectLineOf returns the line where key is set, for messages about its value
// (0 when it cannot tell).
func projectLineOf(data []byte, key string) int {
	for i, line := range bytes.Split(data, []byte("\n")) {
		t := bytes.TrimSpace(line)
		if bytes.HasPrefix(t, []byte(key)) {
			rest := bytes.TrimSpace(t[len(key):])
			if bytes.HasPrefix(rest, []byte("=")) {
				return i + 1
			}
		}
	}
	return 0
}

// selectorLineOf returns the line that holds selector sel of key's list: the
// first line from key's on that holds it as written (a string with escapes
// is not found and gives key's line).
func selectorLineOf(data []byte, key, sel string) int {
	at := projectLineOf(data, key)
	if at == 0 {
		return 0
	}
	lines := bytes.Split(data, []byte("\n"))
	for i := at - 1; i < len(lines); i++ {
		if bytes.Contains(lines[i], []byte(`"`+sel+`"`)) || bytes.Contains(lines[i], []byte("'"+sel+"'")) {
			return i + 1
		}
	}
	return at
}

func projectFileError(p string, line int, msg string) *Error {
	where := quote.Path(p)
	if line > 0 {
		where = fmt.Sprintf("%s:%d", where, line)
	}
	return &Error{Code: CodeProjectFile, Message: fmt.Sprintf("project file %s: %s", where, msg)}
}

// withProject gives a new stage the defaults of the workspace's project
// file: its excludes and protects come first and the caller's are added to
// them; its backend is used when the caller names none. Every way a stage
// opens goes through Begin, so none of them skips the file.
func (w *Workspace) withProject(opts BeginOptions) (BeginOptions, error) {
	if opts.NoProject || failpoint.Disabled("project-defaults") {
		return opts, nil
	}
	f, err := w.Project()
	if err != nil || f == nil {
		return opts, err
	}
	if opts.Backend == "" {
		opts.Backend = f.Backend
	}
	opts.Exclude = append(slices.Clone(f.Exclude), opts.Exclude...)
	opts.Protect = append(slices.Clone(f.Protect), opts.Protect...)
	return opts, nil
}

// projectPath reports whether rel is a project file: it is protected by
// default, as .git is, since it sets the protects of every later stage.
// One in a subdirectory is protected too: it makes that directory a
// workspace of its own for commands started there (discovery stops at
// it), out of reach of the protects of the file above. The letter case is
// ignored, for file systems that ignore it.
func projectPath(rel string) bool {
	if failpoint.Disabled("project-protect") {
		return false
	}
	for _, c := range strings.Split(rel, "/") {
		if strings.EqualFold(c, ProjectFileName) {
			return true
		}
	}
	return false
}
