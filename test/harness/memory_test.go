package harness

import (
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestParseVmRSS(t *testing.T) {
	got, err := parseVmRSS("Name:\tx\nVmHWM:\t    4096 kB\nVmRSS:\t    2048 kB\nThreads:\t4\n")
	if err != nil || got != 2048<<10 {
		t.Errorf("parseVmRSS = %d, %v; want %d", got, err, 2048<<10)
	}
	if _, err := parseVmRSS("Name:\tx\nVmHWM:\t4096 kB\n"); err == nil {
		t.Error("no error without a VmRSS line")
	}
	if _, err := parseVmRSS("VmRSS:\tmany kB\n"); err == nil {
		t.Error("no error for a VmRSS that is not a number")
	}
}

// On the test process itself: 64 MiB touched while sampled, then given
// back to the system before Stop, show in the peak but not in the last
// sample.
func TestWatchRSS(t *testing.T) {
	w, err := WatchRSS(os.Getpid(), 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	block := make([]byte, 64<<20)
	for i := range block {
		block[i] = 1
	}
	time.Sleep(100 * time.Millisecond)
	runtime.KeepAlive(block)
	debug.FreeOSMemory()
	got, err := w.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if got.Growth() < 32<<20 || got.Peak-got.Last < 32<<20 {
		t.Errorf("%s: want the 64 MiB in the peak only", got)
	}
}
