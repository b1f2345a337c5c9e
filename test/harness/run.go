package harness

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Exit statuses of the harnesses.
const (
	ExitOK         = 0
	ExitIncomplete = 1 // the run could not complete
	ExitUsage      = 2 // bad flags
	ExitChecks     = 3 // it completed, and some check failed
)

// NewLogf returns a Logf that prints "[name hh:mm:ss] ..." lines to stderr.
func NewLogf(name string) Logf {
	return func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "[%s %s] %s\n", name, time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
}

// Main parses the command line with parse and exits with the status of
// run, whose context ends on SIGINT or SIGTERM; --help exits 0, bad flags
// ExitUsage.
func Main[O any](name string, parse func(args []string) (O, error), run func(context.Context, O) int) {
	o, err := parse(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(ExitOK)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(ExitUsage)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	status := run(ctx, o)
	cancel()
	os.Exit(status)
}

// ResolvePaths fills in what the flags left empty, all made absolute: root
// is found from the working directory, dir is <root>/_output/<name>, bin
// the operator of `make build`, out <dir>/report.md.
func ResolvePaths(name string, root, dir, bin, out *string) error {
	var err error
	if *root == "" {
		if *root, err = FindRoot(); err != nil {
			return err
		}
	}
	defaults := []struct {
		p   *string
		def func() string
	}{
		{root, func() string { return "" }},
		{dir, func() string { return filepath.Join(*root, "_output", name) }},
		{bin, func() string { return filepath.Join(*root, "_output", "bin", "mpi-operator") }},
		{out, func() string { return filepath.Join(*dir, "report.md") }},
	}
	for _, d := range defaults {
		if *d.p == "" {
			*d.p = d.def()
		}
		if *d.p, err = filepath.Abs(*d.p); err != nil {
			return err
		}
	}
	return nil
}

// FindRoot walks up from the working directory to this module's go.mod.
func FindRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.Contains(string(b), "module github.com/kubeflow/mpi-operator\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the mpi-operator repository; pass --root")
		}
		dir = parent
	}
}

// RunInfo describes a run for the header of its report.
type RunInfo struct {
	Started         time.Time
	Duration        time.Duration
	Machine         string
	OperatorVersion string // what the binary says with --version
	LoadStart       string // the load average at the start
}

// StartRun checks that the operator binary exists and describes the run.
func StartRun(ctx context.Context, bin string) (RunInfo, error) {
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() {
		return RunInfo{}, fmt.Errorf("no operator binary at %s: run `make build` first, or pass --operator", bin)
	}
	version, err := BinaryOutput(ctx, bin, "--version")
	if err != nil {
		version = "unknown (" + err.Error() + ")"
	}
	return RunInfo{Started: time.Now(), Machine: Machine(), OperatorVersion: strings.Join(strings.Fields(version), " "), LoadStart: LoadAverage()}, nil
}

// Finish prints the report to stdout and writes it to out, then returns the
// run's exit status: ExitIncomplete when err is set, ExitChecks when a
// check failed.
func Finish(logf Logf, report, out string, info RunInfo, err error, failed []string) int {
	fmt.Print(report)
	if werr := os.WriteFile(out, []byte(report), 0o644); werr != nil {
		logf("writing %s: %v", out, werr)
	} else {
		logf("report written to %s (%s in all)", out, info.Duration.Round(time.Second))
	}
	if err != nil {
		logf("the run did not complete: %v", err)
		return ExitIncomplete
	}
	if len(failed) > 0 {
		logf("failed checks: %s", strings.Join(failed, "; "))
		return ExitChecks
	}
	return ExitOK
}

// Machine describes the host: CPUs, model, memory.
func Machine() string {
	model := ""
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				var kb int64
				if _, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb); err == nil {
					mem = fmt.Sprintf(", %.0f GiB RAM", float64(kb)/(1<<20))
				}
			}
		}
	}
	s := fmt.Sprintf("nproc %d", runtime.NumCPU())
	if model != "" {
		s += " (" + model + ")"
	}
	return s + mem + ", " + runtime.GOOS + "/" + runtime.GOARCH
}

// BinaryOutput runs the binary with one argument, such as --version or
// --help, and returns what it printed.
func BinaryOutput(ctx context.Context, bin, arg string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, arg).CombinedOutput()
	return string(out), err
}

// LoadAverage is the first three fields of /proc/loadavg: other work on
// the machine slows every component down.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], ", ")
}
