//go:build !linux

package stage

var entries = []Entry{fileOpEntry}
