// Package textdiff computes line diffs and renders them in git's unified
// format, so that a stage's change set can be reviewed with familiar tools,
// fed to "git apply", and applied one hunk at a time.
//
// Vocabulary:
//
//   - A line is a run of bytes ending in "\n"; the last line of a text may
//     lack the "\n". [Lines] splits a text this way, so joining the lines
//     gives the text back byte for byte. "\r\n" stays part of its line.
//   - A hunk ([Hunk]) is one "@@ -a,b +c,d @@" block of a unified diff: a
//     run of changed lines ('-' removed, '+' added) with up to a given
//     number of unchanged context lines (' ') around it. [Diff] produces the
//     hunks turning one text into another; [Apply] applies any subset of
//     them.
//   - A file diff ([FileDiff]) describes one path of a change set: its git
//     modes and contents before and after. [WriteGit] renders it like
//     "git diff" does, [WriteStat] summarises several like "git diff --stat".
//   - Binary content is content with a NUL byte in its first 8000 bytes
//     ([IsBinary]), as git decides it. It is shown as "Binary files ...
//     differ", or as a "GIT binary patch" when [Options.Binary] asks for it.
//
// The package does no I/O of its own beyond writing to the given writers.
package textdiff
