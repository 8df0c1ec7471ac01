package cli

import (
	"github.com/spf13/pflag"

	"github.com/wtx-dev/wtx"
)

// addStageFlags adds STAGE-FLAGS (SPEC §3) to fs.
func addStageFlags(g *globals, fs *pflag.FlagSet, o *wtx.BeginOptions) {
	fs.StringVar(&o.Name, "name", "", "name the stage `N` (usable wherever a stage id is)")
	fs.StringArrayVar(g.selectors(&o.Exclude), "exclude", nil, "leave `SEL` out of the view; it is never applied (repeatable)")
	fs.StringArrayVar(g.selectors(&o.Share), "share", nil, "let the view use the workspace's own `SEL`, untransacted (repeatable; needs the overlay backend)")
	fs.StringArrayVar(g.selectors(&o.Protect), "protect", nil, "make applying changes under `SEL` need --approve (repeatable)")
	fs.StringVar(&o.Backend, "backend", "auto", "staging backend: auto, overlay, clone or copy")
}
