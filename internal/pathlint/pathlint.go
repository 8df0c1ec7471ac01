// Package pathlint finds the places where Go code names a path-based file
// system call: a function of os, syscall or golang.org/x/sys/unix that
// takes a path and resolves it the ordinary way, following every symlink on
// the way. wtx keeps such calls inside its path layer (internal/fsx), which
// resolves beneath an open directory without following links; everything
// else goes through it, or is listed with a reason (see allow.go).
//
// The check reads source only: it parses each file, resolves the name a
// selector's package identifier was imported under (aliases included), and
// reports every use of a listed function, called or not (a function value
// passed along counts too). Test files are not read.
package pathlint

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Forbidden lists, per import path, the functions that act on a path
// resolved the ordinary way: they create, change, remove or open what the
// path names, following symlinks in its directories (and most of them at
// its end). The *at variants that take a directory descriptor are not
// listed: they resolve beneath that descriptor.
var Forbidden = map[string][]string{
	"os": {
		"Chdir", "Chmod", "Chown", "Chtimes", "CopyFS", "Create", "CreateTemp", "DirFS",
		"Lchown", "Link", "Mkdir", "MkdirAll", "MkdirTemp", "Open", "OpenFile", "OpenInRoot",
		"OpenRoot", "ReadDir", "ReadFile", "Remove", "RemoveAll", "Rename", "Symlink",
		"Truncate", "WriteFile",
	},
	"syscall": {
		"Chdir", "Chmod", "Chown", "Chroot", "Creat", "Lchown", "Link", "Mkdir", "Mkfifo",
		"Mknod", "Mount", "Open", "PivotRoot", "Removexattr", "Rename", "Rmdir", "Setxattr",
		"Symlink", "Truncate", "Unlink", "Unmount", "Utimes", "UtimesNano",
	},
	"golang.org/x/sys/unix": {
		"Chdir", "Chmod", "Chown", "Chroot", "Creat", "Lchown", "Lremovexattr", "Lsetxattr",
		"Link", "Mkdir", "Mkfifo", "Mknod", "Mount", "Open", "PivotRoot", "Removexattr",
		"Rename", "Rmdir", "Setxattr", "Symlink", "Truncate", "Unlink", "Unmount", "Utimes",
		"UtimesNano",
	},
}

// A Finding is one use of a forbidden function.
type Finding struct {
	File string // slash-separated, relative to the module root
	Line int
	Func string // the enclosing function, "Type.Method" or "func" for a literal at top level
	Call string // "os.Remove", "unix.Mount": the import path's last element and the name
}

func (f Finding) String() string {
	return fmt.Sprintf("%s:%d: %s in %s", f.File, f.Line, f.Call, f.Func)
}

// Scan parses every non-test Go file beneath root (skipping directories
// named testdata, vendor or starting with a dot) and returns the uses of
// forbidden functions, sorted by file and line.
func Scan(root string) ([]Finding, error) {
	var out []Finding
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		found, err := ScanFile(filepath.ToSlash(rel), p, nil)
		if err != nil {
			return err
		}
		out = append(out, found...)
		return nil
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].File != out[j].File {
			return out[i].File < out[j].File
		}
		return out[i].Line < out[j].Line
	})
	return out, err
}

// ScanFile returns the uses of forbidden functions in one file, read from
// filename, or parsed from src when src is not nil. rel names the file in
// findings.
func ScanFile(rel, filename string, src any) ([]Finding, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filename, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	// The name each watched package goes by in this file.
	local := map[string]string{}
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			return nil, err
		}
		if _, ok := Forbidden[p]; !ok {
			continue
		}
		name := path.Base(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		if name == "_" {
			continue
		}
		if name == "." {
			return nil, fmt.Errorf("%s: dot-import of %s hides its calls from the path check", rel, p)
		}
		local[name] = p
	}
	if len(local) == 0 {
		return nil, nil
	}
	var out []Finding
	for _, decl := range f.Decls {
		fn := "package scope"
		if fd, ok := decl.(*ast.FuncDecl); ok {
			fn = funcName(fd)
		}
		ast.Inspect(decl, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			p, ok := local[id.Name]
			if !ok || !listed(p, sel.Sel.Name) {
				return true
			}
			out = append(out, Finding{File: rel, Line: fset.Position(sel.Pos()).Line, Func: fn,
				Call: path.Base(p) + "." + sel.Sel.Name})
			return true
		})
	}
	return out, nil
}

func listed(pkg, name string) bool {
	for _, n := range Forbidden[pkg] {
		if n == name {
			return true
		}
	}
	return false
}

// funcName names a declared function as the allowlist does: "Name" or
// "Type.Name" for a method (pointer or not).
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fd.Name.Name
		}
		return fd.Name.Name
	}
}
