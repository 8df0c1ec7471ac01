// Package project reads a workspace's project file, .wtx.toml at the
// workspace root: the defaults every new stage of the workspace gets
// (excludes, protects, backend), as .gitignore is for git. The library
// reads no file of the user's; the wtx command and its MCP server read
// this one and pass what it says on as options.
package project

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/pelletier/go-toml/v2"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/quote"
)

// FileName is the project file's name at the workspace root.
const FileName = ".wtx.toml"

// maxSize bounds the file: it holds a few lists of selectors.
const maxSize = 1 << 20

// Backends are the values backend may take.
var Backends = []string{"auto", "overlay", "clone", "copy"}

// File is a parsed project file.
type File struct {
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
type raw struct {
	Backend *string  `toml:"backend"`
	Exclude []string `toml:"exclude"`
	Protect []string `toml:"protect"`
}

// Load reads root/.wtx.toml. It returns nil and no error when there is no
// such file. A file wtx cannot use (not a regular file, unreadable, not
// TOML, an unknown key, a value of the wrong type, a backend it does not
// know, an empty selector or one with a NUL byte) is an error with code
// usage.project-file that names the line.
func Load(root string) (*File, error) {
	p := filepath.Join(root, FileName)
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fileError(p, 0, "is a symbolic link; the project file must be a regular file at the workspace root")
		}
		return nil, &wtx.Error{Code: wtx.CodeProjectFile, Message: fmt.Sprintf("project file %s: %v", quote.Path(p), err), Err: err}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, wtx.AsError(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fileError(p, 0, "is not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSize+1))
	if err != nil {
		return nil, &wtx.Error{Code: wtx.CodeProjectFile, Message: fmt.Sprintf("project file %s: %v", quote.Path(p), err), Err: err}
	}
	if len(data) > maxSize {
		return nil, fileError(p, 0, fmt.Sprintf("is larger than %d bytes", maxSize))
	}
	return Parse(p, data)
}

// Parse parses the contents of the project file at path p.
func Parse(p string, data []byte) (*File, error) {
	var r raw
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
			return nil, fileError(p, row, msg)
		}
		return nil, fileError(p, 0, strings.TrimPrefix(err.Error(), "toml: "))
	}
	f := &File{Path: p, Exclude: r.Exclude, Protect: r.Protect}
	if f.Exclude == nil {
		f.Exclude = []string{}
	}
	if f.Protect == nil {
		f.Protect = []string{}
	}
	if r.Backend != nil {
		ok := false
		for _, b := range Backends {
			ok = ok || *r.Backend == b
		}
		if !ok {
			return nil, fileError(p, lineOf(data, "backend"), fmt.Sprintf("backend %q is not one of %s", *r.Backend, strings.Join(Backends, ", ")))
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
				return nil, fileError(p, lineOf(data, l.key), l.key+" holds an empty selector")
			case strings.IndexByte(s, 0) >= 0:
				return nil, fileError(p, lineOf(data, l.key), fmt.Sprintf("%s selector %s holds a NUL byte, which no name can", l.key, quote.Path(s)))
			}
		}
	}
	return f, nil
}

// lineOf returns the line where key is set, for messages about its value
// (0 when it cannot tell).
func lineOf(data []byte, key string) int {
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

func fileError(p string, line int, msg string) *wtx.Error {
	where := quote.Path(p)
	if line > 0 {
		where = fmt.Sprintf("%s:%d", where, line)
	}
	return &wtx.Error{Code: wtx.CodeProjectFile, Message: fmt.Sprintf("project file %s: %s", where, msg)}
}
