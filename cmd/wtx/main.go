// Command wtx gives a directory transactions. See the README and 'wtx --help'.
package main

import (
	"os"

	"github.com/wtx-dev/wtx/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:])) }
