// Package stagetest is the conformance suite for staging backends. Every
// [stage.Backend] runs [Run] from its own tests: backends differ in cost,
// never in what a view holds or what its Scan reports.
//
// The suite touches a view only through the [stage.View] interface: it
// changes the staged tree by running commands made ready by
// [stage.View.Prepare], and reads it back with Scan, OpenFile and Readlink,
// so that backends whose view lives inside a namespace run it unchanged.
package stagetest
