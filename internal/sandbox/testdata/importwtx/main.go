// Command importwtx imports wtx and the package that makes its views, and
// prints "plain": started with the arguments and environment of one of
// wtx's own re-executions it must still print it, unless it hands them to
// sandbox.Main (IMPORTWTX_MAIN=1).
package main

import (
	"fmt"
	"os"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/sandbox"
	"github.com/wtx-dev/wtx/internal/stage"
)

var (
	_ = wtx.Open
	_ = stage.Entries
)

func main() {
	if os.Getenv("IMPORTWTX_MAIN") == "1" && sandbox.Main() {
		return
	}
	fmt.Println("plain")
}
