//go:build wtxfailpoint

package failpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// faults is the parsed WTX_FAULT setting.
var faults struct {
	once       sync.Once
	mu         sync.Mutex
	n          int           // the call that fails first (1-based); 0: none
	errno      syscall.Errno // what it fails with
	persistent bool          // every later call fails too
	op         string        // only calls of this op count ("" for all)
	count      int
}

// faultErrnos are the errors WTX_FAULT can inject.
var faultErrnos = map[string]syscall.Errno{
	"EIO":    syscall.EIO,
	"ENOSPC": syscall.ENOSPC,
	"EDQUOT": syscall.EDQUOT,
	"EROFS":  syscall.EROFS,
}

// Fault returns the error injected into the mutating file-system call op
// (mkdir, symlink, unlink, rmdir, chmod, rename, create, fsync), or nil.
// The environment arms it:
//
//	WTX_FAULT=N:ERRNO[:persistent]
//	                     the N-th mutating call fails with ERRNO (EIO,
//	                     ENOSPC, EDQUOT or EROFS); with persistent, every
//	                     later one fails too
//	WTX_FAULT_OP=op      count only the calls of op (fsync, say)
//	WTX_FAULT_COUNT=FILE append "N op" per counted call to FILE, and
//	                     "N op fault ERRNO" for each injected error
//
// A malformed WTX_FAULT is reported on stderr and injects nothing.
func Fault(op string) error {
	faults.once.Do(parseFault)
	if faults.op != "" && faults.op != op {
		return nil
	}
	countFile := os.Getenv("WTX_FAULT_COUNT")
	if faults.n == 0 && countFile == "" {
		return nil
	}
	faults.mu.Lock()
	defer faults.mu.Unlock()
	faults.count++
	var err error
	if faults.n != 0 && (faults.count == faults.n || faults.persistent && faults.count > faults.n) {
		err = faults.errno
	}
	if countFile != "" {
		if out, oerr := os.OpenFile(countFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); oerr == nil {
			if err != nil {
				fmt.Fprintf(out, "%d %s fault %s\n", faults.count, op, errnoName(faults.errno))
			} else {
				fmt.Fprintf(out, "%d %s\n", faults.count, op)
			}
			out.Close()
		}
	}
	return err
}

func parseFault() {
	faults.op = os.Getenv("WTX_FAULT_OP")
	spec := os.Getenv("WTX_FAULT")
	if spec == "" {
		return
	}
	parts := strings.Split(spec, ":")
	n, err := strconv.Atoi(parts[0])
	errno, ok := syscall.Errno(0), false
	if len(parts) >= 2 {
		errno, ok = faultErrnos[strings.ToUpper(parts[1])]
	}
	if err != nil || n < 1 || !ok || len(parts) > 3 || len(parts) == 3 && parts[2] != "persistent" {
		fmt.Fprintf(os.Stderr, "failpoint: WTX_FAULT=%q: want N:EIO|ENOSPC|EDQUOT|EROFS[:persistent]\n", spec)
		return
	}
	faults.n, faults.errno, faults.persistent = n, errno, len(parts) == 3
}

func errnoName(e syscall.Errno) string {
	for name, v := range faultErrnos {
		if v == e {
			return name
		}
	}
	return strconv.Itoa(int(e))
}
