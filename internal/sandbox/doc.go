// Package sandbox holds the one explicit entry of the processes wtx starts
// from its own binary to supervise and confine a command run in a view.
//
// A program that imports wtx runs none of it by itself: the program's main
// calls [Main] first (cmd/wtx does), and so does the TestMain of every test
// binary that runs commands in views.
package sandbox
