package benchmark

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
)

// This process's own figures: CPU time, peak resident memory, heap and goroutines. Both
// controllers run in it, one at a time, so these are the working controller's (plus the
// benchmark's client, the same for both).

// cpuSeconds is this process's user and system CPU time so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

// resetPeakRSS frees what the Go heap holds and no longer needs, then starts the kernel's
// peak-RSS count (VmHWM) again from the current RSS.
func resetPeakRSS() error {
	runtime.GC()
	debug.FreeOSMemory()
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// peakRSS is this process's peak resident memory, in bytes, since the last reset.
func peakRSS() (uint64, error) { return peakRSSOf("self") }

// peakRSSOf is the peak resident memory (VmHWM), in bytes, of the process of /proc/<proc>.
func peakRSSOf(proc string) (uint64, error) {
	status, err := os.ReadFile("/proc/" + proc + "/status")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%s/status", proc)
}

// memInUse is the bytes of the Go heap's spans in use, and of goroutine stacks.
func memInUse() (heap, stacks uint64) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse, m.StackInuse
}
