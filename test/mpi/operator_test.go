package mpi

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// operatorPort serves the operator's /metrics and /healthz.
const operatorPort = "31080"

// operatorProc is the operator binary running as a child process.
type operatorProc struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once the process has exited
}

// startOperator runs the operator with the admin kubeconfig, watching every
// namespace, logging to LOCAL_DIR/operator.log.
func startOperator(bin string) (*operatorProc, error) {
	logPath := filepath.Join(env.dir, "operator.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin,
		"--kubeConfig", env.kubeconfig,
		"--lock-namespace=mpi-operator",
		"--monitoring-port="+operatorPort,
		"--kubectl-delivery-image=mpioperator/kubectl-delivery:mpi-test",
		"-v=2")
	cmd.Env = withoutKubeconfig(os.Environ())
	for i, kv := range cmd.Env {
		if strings.HasPrefix(kv, "KUBEFLOW_NAMESPACE=") {
			cmd.Env[i] = "KUBEFLOW_NAMESPACE="
		}
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Should this test process die without stopping it (an interrupt, a
	// timeout's panic), the kernel stops the operator too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting the operator: %w", err)
	}
	p := &operatorProc{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM, and SIGKILL when the operator has not exited 30 s
// later.
func (p *operatorProc) stop() {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		fmt.Fprintln(os.Stderr, "mpi: stopping the operator:", err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
