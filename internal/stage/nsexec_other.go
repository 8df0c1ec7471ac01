//go:build !linux

package stage

import (
	"fmt"
	"os"
)

// NamespaceMain is the entry point of the overlay backend's namespace
// helper. Only Linux has one: here it reports that and returns 125.
func NamespaceMain(args []string) int {
	fmt.Fprintln(os.Stderr, "wtx: the namespace helper needs Linux")
	return 125
}
