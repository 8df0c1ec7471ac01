// Package failpoint marks the points of the apply and recovery code where a
// crash is tested. In an ordinary build Hit does nothing and costs a function
// call; a build with the tag wtxfailpoint arms it from the environment:
//
//	WTX_FAILPOINT=N          crash (SIGKILL itself) at the N-th point hit
//	WTX_FAILPOINT=name       crash at the first point with that name
//	WTX_FAILPOINT_COUNT=FILE append one line per point hit to FILE
//	WTX_FAILPOINT_PAUSE=name:DUR
//	                         sleep DUR at every hit of the point name (to
//	                         widen a window a concurrent process must not
//	                         slip into)
//	WTX_FAILPOINT_HOLD=name@DIR
//	                         at each hit of the point name, make
//	                         DIR/reached and wait until DIR/release exists
//	                         (a test acts at the point, then lets it go on)
//	WTX_TALLY=FILE           append one line per counted operation (Tally)
//	                         to FILE, without making it a crash point
//	WTX_FAILPOINT_ACTION=shutdown:DIR
//	                         before crashing, shut down DIR's filesystem
//	                         without a log flush (Linux; a power-cut stand-in)
//
// so a test can count the points of an apply, then crash it at each one.
package failpoint
