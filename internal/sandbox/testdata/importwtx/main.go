// Command importwtx imports wtx and the package that makes its views, and
// prints "plain": started with the arguments and environment of one of
// wtx's own re-executions it must still print it, unless it hands them to
// sandbox.Main or wtx.Reexec (IMPORTWTX_MAIN=sandbox or wtx).
package main

import (
	"fmt"
	"os"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/sandbox"
	"github.com/wtx-dev/wtx/internal/stage"
)

var _ = stage.Entries

func main() {
	switch os.Getenv("IMPORTWTX_MAIN") {
	case "sandbox":
		if sandbox.Main() {
			return
		}
	case "wtx":
		if wtx.Reexec() {
			return
		}
	}
	fmt.Println("plain")
}
