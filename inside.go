package wtx

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/quote"
)

// InStage is what the environment says about a stage the calling process
// runs in: wtx run and wtx shell give their command WTX_TX (the stage) and
// WTX_WORKSPACE (the workspace). The caller reads the environment and fills
// it in; the library reads none.
type InStage struct {
	Tx        string
	Workspace string
}

// InsideStageError details a refusal to act from inside a stage's view
// (precondition.inside-stage): the stage, its workspace when known, and
// how it was detected.
type InsideStageError struct {
	Tx        string // the stage's id
	Workspace string // the workspace the stage belongs to, when known
	// How is one of the InsideBy constants.
	How string
}

func (e *InsideStageError) Error() string {
	return fmt.Sprintf("inside stage %s (%s)", e.Tx, e.How)
}

// Ways of telling that wtx runs inside a stage's view.
const (
	InsideByEnv     = "environment"
	InsideByProcess = "supervising process"
	InsideByPath    = "view path"
	InsideByMount   = "overlay mount"
)

var (
	stageIDRE = regexp.MustCompile(`^tx-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8}$`)
	// stageDirRE finds a stage directory in a path: .../stages/tx-…/
	stageDirRE = regexp.MustCompile(`(^|/)stages/(tx-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8})(/|$)`)
)

// checkInsideStage refuses to open workspace path from inside a stage's
// view (L-003). A command run inside a view sees the view where the
// workspace was: acting there would apply into the view, settle or drop
// the stage that holds its own writes, or stage a stage of the view.
// Detection does not rest on the environment alone, which the command may
// change: the environment of the stage's supervisor, an ancestor of every
// process of the command, is read too, and the workspace path itself is
// checked (a copy or clone view lies in a stage directory; an overlay view
// is an overlay mount whose upper directory is a stage's).
func checkInsideStage(path, stateDir string, env InStage) error {
	if failpoint.Disabled("inside-stage") {
		return nil
	}
	if env.Tx != "" && (env.Workspace == "" || within(path, env.Workspace) || within(env.Workspace, path)) {
		return insideError(path, &InsideStageError{Tx: env.Tx, Workspace: env.Workspace, How: InsideByEnv})
	}
	if anc := stageOfAncestor(); anc.Tx != "" && anc.Workspace != "" && (within(path, anc.Workspace) || within(anc.Workspace, path)) {
		return insideError(path, &InsideStageError{Tx: anc.Tx, Workspace: anc.Workspace, How: InsideByProcess})
	}
	if tx := stageOfViewPath(path, stateDir); tx != "" {
		return insideError(path, &InsideStageError{Tx: tx, How: InsideByPath})
	}
	if tx := stageOfMount(path, stateDir); tx != "" {
		e := &InsideStageError{Tx: tx, How: InsideByMount}
		if env.Tx == tx {
			e.Workspace = env.Workspace
		}
		return insideError(path, e)
	}
	return nil
}

func insideError(path string, ie *InsideStageError) *Error {
	of := ""
	if ie.Workspace != "" {
		of = " of workspace " + quote.Path(ie.Workspace)
	}
	return &Error{Code: CodeInsideStage, Err: ie,
		Message: fmt.Sprintf("wtx is running inside stage %s%s (detected by its %s): acting on %s from here would act on the stage's view or on the stage it runs in, and could settle, drop or rewrite that stage and lose its staged writes; run the command from outside the stage",
			ie.Tx, of, ie.How, quote.Path(path))}
}

// stageOfViewPath returns the stage whose directory holds path: path lies
// under STATE/stages/<tx>/ of this state root, or under a directory that
// looks like any state root's stage directory (stages/<tx>/ with the
// stage's base manifest beside), as when the command changed the state
// root it passes to wtx.
func stageOfViewPath(path, stateDir string) string {
	stages := filepath.Join(stateDir, "stages")
	if rest, ok := strings.CutPrefix(path, stages+string(filepath.Separator)); ok {
		tx, _, _ := strings.Cut(rest, string(filepath.Separator))
		if stageIDRE.MatchString(tx) {
			return tx
		}
	}
	for _, m := range stageDirRE.FindAllStringSubmatchIndex(path, -1) {
		dir := path[:m[5]]
		if _, err := os.Lstat(filepath.Join(dir, "base.manifest")); err == nil {
			return path[m[4]:m[5]]
		}
	}
	return ""
}

// stageOfUpper returns the stage whose upper directory upper is: under
// this state root's stages directory, or stages/<tx>/upper of another.
func stageOfUpper(upper, stateDir string) string {
	stages := filepath.Join(stateDir, "stages")
	if rest, ok := strings.CutPrefix(upper, stages+string(filepath.Separator)); ok {
		tx, _, _ := strings.Cut(rest, string(filepath.Separator))
		if stageIDRE.MatchString(tx) {
			return tx
		}
	}
	if filepath.Base(upper) == "upper" {
		tx := filepath.Base(filepath.Dir(upper))
		if stageIDRE.MatchString(tx) && filepath.Base(filepath.Dir(filepath.Dir(upper))) == "stages" {
			return tx
		}
	}
	return ""
}
