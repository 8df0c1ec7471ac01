package cli

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/answer"
	"github.com/wtx-dev/wtx/internal/quote"
)

// Commands across every workspace of the state root: list --all, gc --all.

// listAll answers list --all: every workspace of the state root, with its
// path, open stages and the disk its stages take. It opens no workspace
// (and so records none).
func (g *globals) listAll(ctx context.Context) error {
	sd, err := g.stateDir()
	if err != nil {
		return err
	}
	root, err := wtx.OpenStateRoot(ctx, sd)
	if err != nil {
		return err
	}
	defer root.Close()
	list, err := root.Workspaces(ctx)
	if err != nil {
		return err
	}
	if g.json {
		out := answer.ListAll{Workspaces: []answer.WorkspaceInfo{}}
		out.StateDir, out.StateDirB64 = answer.Name(root.Dir())
		for _, s := range list {
			w := answer.WorkspaceInfo{Missing: s.Missing, Open: s.Open, Stages: s.Stages, OpenTxs: orEmpty(s.OpenTxs), Size: s.Size, Ops: s.Ops}
			w.Path, w.PathB64 = answer.Name(s.Path)
			out.Workspaces = append(out.Workspaces, w)
		}
		return g.emit("list", out)
	}
	if len(list) == 0 {
		g.notice("wtx: the state root %s holds no workspace", quote.Path(root.Dir()))
		return nil
	}
	tw := tabwriter.NewWriter(g.io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKSPACE\tOPEN\tSTAGES\tOPS\tSIZE")
	for _, s := range list {
		path := quote.Path(s.Path)
		if s.Missing {
			path += " (gone)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", path, s.Open, s.Stages, s.Ops, humanBytes(s.Size))
	}
	return tw.Flush()
}

// gcAll collects garbage in every workspace of the state root: each
// workspace's settled stages (under its own lock), then one sweep of the
// shared blob store. A workspace whose directory is gone, or that cannot
// be opened, is left alone and the answer says why.
func (g *globals) gcAll(ctx context.Context, opts wtx.GCOptions) error {
	sd, err := g.stateDir()
	if err != nil {
		return err
	}
	root, err := wtx.OpenStateRoot(ctx, sd)
	if err != nil {
		return err
	}
	list, err := root.Workspaces(ctx)
	root.Close()
	if err != nil {
		return err
	}
	out := answer.GCAll{Workspaces: []answer.GCWorkspace{}, DryRun: opts.DryRun, OlderThan: opts.OlderThan.Seconds()}
	last := ""
	for _, s := range list {
		e := answer.GCWorkspace{Stages: []string{}}
		e.Path, e.PathB64 = answer.Name(s.Path)
		if s.Missing {
			e.Skipped = "the workspace's directory is gone"
			out.Workspaces = append(out.Workspaces, e)
			continue
		}
		stagesOnly := opts
		stagesOnly.StagesOnly = true
		res, err := g.gcAt(ctx, s.Path, stagesOnly)
		if err != nil {
			e.Skipped = wtx.AsError(err).Message
			out.Workspaces = append(out.Workspaces, e)
			continue
		}
		e.Stages, e.Bytes = orEmpty(res.Stages), res.Bytes
		out.Stages += len(res.Stages)
		out.Bytes += res.Bytes
		out.Workspaces = append(out.Workspaces, e)
		last = s.Path
	}
	if last != "" {
		// The blob store is shared: one sweep, through any workspace.
		res, err := g.gcAt(ctx, last, opts)
		if err != nil {
			return err
		}
		out.Blobs, out.Bytes = res.Blobs, out.Bytes+res.Bytes
	}
	if g.json {
		return g.emit("gc", out)
	}
	verb := "freed"
	if opts.DryRun {
		verb = "would free"
	}
	fmt.Fprintf(g.io.Out, "%s %d stage(s) in %d workspace(s), %d blob(s), %s\n", verb, out.Stages, len(out.Workspaces), out.Blobs, humanBytes(out.Bytes))
	for _, w := range out.Workspaces {
		switch {
		case w.Skipped != "":
			fmt.Fprintf(g.io.Out, "  %s: left alone: %s\n", w.Path, quote.Text(w.Skipped))
		case len(w.Stages) > 0:
			fmt.Fprintf(g.io.Out, "  %s: %d stage(s), %s\n", w.Path, len(w.Stages), humanBytes(w.Bytes))
		}
	}
	if out.Stages == 0 && opts.OlderThan > 0 {
		g.notice("wtx: only stages settled more than %s ago go; --older-than 0 takes every settled stage", opts.OlderThan)
	}
	return nil
}

// gcAt runs gc in the workspace at path.
func (g *globals) gcAt(ctx context.Context, path string, opts wtx.GCOptions) (*wtx.GCResult, error) {
	saved := g.dir
	g.dir = path
	ws, err := g.open(ctx)
	g.dir = saved
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	return ws.GC(ctx, opts)
}
