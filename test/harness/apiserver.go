package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// APIServerRestart is when each step of a restart of the API server
// happened.
type APIServerRestart struct {
	OldPID, NewPID int
	Stopping       time.Time // SIGTERM sent
	Exited         time.Time // the old process gone, its port free
	Started        time.Time // the new process started
	Ready          time.Time // /readyz answered "ok"
}

// Downtime is from the SIGTERM to /readyz answering again.
func (r APIServerRestart) Downtime() time.Duration { return r.Ready.Sub(r.Stopping) }

// RestartAPIServer restarts the kube-apiserver of a cluster the harness
// started, and only that component: the process recorded in
// <Dir>/pids/kube-apiserver.pid by hack/cluster-up.sh gets SIGTERM (SIGKILL
// after stopTimeout), and once it has exited (so its port is free) the same
// command line starts again with the same environment, its output appended
// to <Dir>/kube-apiserver.log, in a session of its own, its PID recorded in
// the same file so that hack/cluster-down.sh stops it. It returns once
// /readyz answers "ok", or readyTimeout has passed. etcd keeps every object.
func (c *Cluster) RestartAPIServer(ctx context.Context, stopTimeout, readyTimeout time.Duration) (APIServerRestart, error) {
	var r APIServerRestart
	if !c.Started() {
		return r, errNotStarted
	}
	const name = "kube-apiserver"
	pidFile := filepath.Join(c.Dir, "pids", name+".pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return r, err
	}
	if r.OldPID, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
		return r, fmt.Errorf("%s: %w", pidFile, err)
	}
	argv, env, err := processCommand(r.OldPID)
	if err != nil {
		return r, err
	}
	// PIDs get reused: signal only our cluster's API server.
	if filepath.Base(argv[0]) != name || !strings.Contains(strings.Join(argv, " "), c.Dir+"/") {
		return r, fmt.Errorf("pid %d of %s is not this cluster's %s: %q", r.OldPID, pidFile, name, argv)
	}

	r.Stopping = time.Now()
	if err := syscall.Kill(r.OldPID, syscall.SIGTERM); err != nil {
		return r, fmt.Errorf("SIGTERM to %s (pid %d): %w", name, r.OldPID, err)
	}
	if !waitExit(ctx, r.OldPID, stopTimeout) {
		c.logf("%s (pid %d) still running %s after SIGTERM: SIGKILL", name, r.OldPID, stopTimeout)
		_ = syscall.Kill(r.OldPID, syscall.SIGKILL)
		if !waitExit(ctx, r.OldPID, time.Minute) {
			return r, fmt.Errorf("%s (pid %d) did not exit", name, r.OldPID)
		}
	}
	r.Exited = time.Now()

	logFile, err := os.OpenFile(filepath.Join(c.Dir, name+".log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return r, err
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "\n----- restarted by the harness at %s -----\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// A session of its own, as cluster-up.sh starts it: an interrupt of the
	// harness does not reach it, and hack/cluster-down.sh stops it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return r, fmt.Errorf("starting %s again: %w", name, err)
	}
	r.Started, r.NewPID = time.Now(), cmd.Process.Pid
	// Reap it whenever it exits while the harness runs.
	go func() { _ = cmd.Wait() }()
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(r.NewPID)+"\n"), 0o644); err != nil {
		return r, err
	}

	err = Poller{}.Until(ctx, readyTimeout, func() (bool, error) {
		if !alive(r.NewPID) {
			return false, fmt.Errorf("%s exited after its restart; see %s", name, filepath.Join(c.Dir, name+".log"))
		}
		return c.Ready(ctx), nil
	})
	if errors.Is(err, ErrTimeout) {
		err = fmt.Errorf("%s not ready %s after its restart", name, readyTimeout)
	}
	if err != nil {
		return r, err
	}
	r.Ready = time.Now()
	return r, nil
}

// processCommand reads a process's argv and environment from /proc.
func processCommand(pid int) (argv, env []string, err error) {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, nil, err
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return nil, nil, err
	}
	split := func(b []byte) []string {
		var out []string
		for _, f := range bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0}) {
			out = append(out, string(f))
		}
		return out
	}
	argv = split(cmdline)
	if len(argv) == 0 || argv[0] == "" {
		return nil, nil, fmt.Errorf("pid %d has no command line", pid)
	}
	return argv, split(environ), nil
}

// alive tells whether a process exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state letter follows "(comm) ".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	state := b[i+2]
	return state != 'Z' && state != 'X'
}

// waitExit waits up to timeout for a process to be gone.
func waitExit(ctx context.Context, pid int, timeout time.Duration) bool {
	return (Poller{Every: 50 * time.Millisecond}).Until(ctx, timeout, func() (bool, error) { return !alive(pid), nil }) == nil
}
