package harness

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// RSS is the resident set of process pid (VmRSS of /proc/PID/status), in
// bytes.
func RSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseVmRSS(string(data))
}

func parseVmRSS(status string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		v, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmRSS %q: %w", v, err)
		}
		return kib << 10, nil
	}
	return 0, errors.New("no VmRSS line in the process status")
}

// MiB is b bytes in mebibytes.
func MiB(b int64) float64 { return float64(b) / (1 << 20) }

// RSSWatch samples the resident set of a process at a fixed period, from
// the first sample (taken by WatchRSS) until Stop.
type RSSWatch struct {
	pid  int
	stop chan struct{}
	wg   sync.WaitGroup
	rss  RSSSamples
	err  error
}

// RSSSamples are what an RSSWatch saw, in bytes.
type RSSSamples struct {
	First, Peak, Last int64
}

// Growth is how far the peak rose above the first sample.
func (s RSSSamples) Growth() int64 { return s.Peak - s.First }

func (s RSSSamples) String() string {
	return fmt.Sprintf("RSS %.1f MiB before, %.1f MiB after, peak %.1f MiB (growth %.1f MiB)",
		MiB(s.First), MiB(s.Last), MiB(s.Peak), MiB(s.Growth()))
}

// WatchRSS takes a first sample of process pid's resident set, then one
// every period until Stop.
func WatchRSS(pid int, every time.Duration) (*RSSWatch, error) {
	first, err := RSS(pid)
	if err != nil {
		return nil, err
	}
	w := &RSSWatch{pid: pid, stop: make(chan struct{}), rss: RSSSamples{First: first, Peak: first, Last: first}}
	w.wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
				if w.err = w.sample(); w.err != nil {
					return
				}
			}
		}
	})
	return w, nil
}

func (w *RSSWatch) sample() error {
	v, err := RSS(w.pid)
	if err != nil {
		return err
	}
	w.rss.Last, w.rss.Peak = v, max(w.rss.Peak, v)
	return nil
}

// Stop ends the sampling, takes a last sample and returns what was seen;
// the error is the one that ended the sampling (the process exited), if
// any.
func (w *RSSWatch) Stop() (RSSSamples, error) {
	close(w.stop)
	w.wg.Wait()
	if w.err == nil {
		w.err = w.sample()
	}
	return w.rss, w.err
}
