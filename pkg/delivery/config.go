// Package delivery implements the kubectl-delivery init container of an
// MPIJob launcher: it installs a kubectl binary into a shared volume and
// blocks until enough of the job's worker pods are running and ready.
package delivery

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// Environment variables read by LoadConfig. They form the contract between
// the operator, which sets them on the init container, and this program.
const (
	EnvTargetDir       = "TARGET_DIR"
	EnvKubectlSource   = "KUBECTL_SOURCE"
	EnvNamespace       = "NAMESPACE"
	EnvWorkerSelector  = "WORKER_SELECTOR"
	EnvMinReadyWorkers = "MIN_READY_WORKERS"
	EnvHostfile        = "HOSTFILE"
	EnvPodName         = "POD_NAME"
)

// Defaults applied when the corresponding variable is unset or blank.
const (
	DefaultTargetDir     = "/opt/kube"
	DefaultKubectlSource = "/opt/kubectl-delivery/kubectl"
	DefaultHostfile      = "/etc/mpi/hostfile"

	// ServiceAccountNamespaceFile is consulted when NAMESPACE is empty.
	ServiceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

	// KubectlBinaryName is the file name kubectl gets inside TARGET_DIR.
	KubectlBinaryName = "kubectl"
)

// Config is the validated configuration of one kubectl-delivery run.
type Config struct {
	// TargetDir is the directory kubectl is installed into.
	TargetDir string
	// KubectlSource is the kubectl binary shipped in the image.
	KubectlSource string
	// Namespace holds the job's pods. It may be empty only when there is
	// nothing to wait for.
	Namespace string

	// WorkerSelector is the canonical form of WORKER_SELECTOR. When it is
	// empty, the hostfile fallback is used instead.
	WorkerSelector string
	// MinReadyWorkers is how many selected workers must be ready at the
	// same time. Zero disables waiting. Ignored in hostfile mode.
	MinReadyWorkers int

	// HostfilePath is the hostfile read in fallback mode.
	HostfilePath string
	// PodName is the launcher's own pod name; its hostfile entry, if any,
	// is skipped. Only resolved in fallback mode.
	PodName string
	// HostfileWorkers are the pods named by the hostfile (without the
	// launcher), in file order and without duplicates. Only set in
	// fallback mode.
	HostfileWorkers []string
}

// UsesHostfile reports whether the worker set comes from the hostfile
// because no WORKER_SELECTOR was given.
func (c Config) UsesHostfile() bool {
	return c.WorkerSelector == ""
}

// NeedsWait reports whether any worker pod has to be waited for.
func (c Config) NeedsWait() bool {
	if c.UsesHostfile() {
		return len(c.HostfileWorkers) > 0
	}
	return c.MinReadyWorkers > 0
}

// KubectlTarget is the path kubectl is installed at.
func (c Config) KubectlTarget() string {
	return filepath.Join(c.TargetDir, KubectlBinaryName)
}

// Environment is the process environment LoadConfig reads from. It exists so
// that tests can supply their own variables and files.
type Environment struct {
	Getenv   func(key string) string
	ReadFile func(path string) ([]byte, error)
	Hostname func() (string, error)
}

// OSEnvironment returns the real process environment.
func OSEnvironment() Environment {
	return Environment{
		Getenv:   os.Getenv,
		ReadFile: os.ReadFile,
		Hostname: os.Hostname,
	}
}

func (e Environment) get(key string) string {
	if e.Getenv == nil {
		return ""
	}
	return strings.TrimSpace(e.Getenv(key))
}

func (e Environment) readFile(path string) ([]byte, error) {
	if e.ReadFile == nil {
		return nil, fmt.Errorf("open %s: %w", path, os.ErrNotExist)
	}
	return e.ReadFile(path)
}

// LoadConfig builds a Config from the environment and checks it. Every
// problem found is reported in the returned error, not just the first one.
func LoadConfig(env Environment) (Config, error) {
	var errs []error
	cfg := Config{
		TargetDir:     orDefault(env.get(EnvTargetDir), DefaultTargetDir),
		KubectlSource: orDefault(env.get(EnvKubectlSource), DefaultKubectlSource),
		Namespace:     env.get(EnvNamespace),
	}

	cfg.TargetDir = filepath.Clean(cfg.TargetDir)
	cfg.KubectlSource = filepath.Clean(cfg.KubectlSource)
	if cfg.KubectlSource == cfg.KubectlTarget() {
		errs = append(errs, fmt.Errorf("%s and %s/%s are the same file %q; kubectl cannot be copied onto itself",
			EnvKubectlSource, EnvTargetDir, KubectlBinaryName, cfg.KubectlSource))
	}

	if raw := env.get(EnvMinReadyWorkers); raw != "" {
		n, err := strconv.Atoi(raw)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s=%q is not an integer", EnvMinReadyWorkers, raw))
		case n < 0:
			errs = append(errs, fmt.Errorf("%s=%d must not be negative", EnvMinReadyWorkers, n))
		default:
			cfg.MinReadyWorkers = n
		}
	}

	if raw := env.get(EnvWorkerSelector); raw != "" {
		sel, err := labels.Parse(raw)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s=%q is not a valid label selector: %w", EnvWorkerSelector, raw, err))
		case sel.Empty():
			errs = append(errs, fmt.Errorf("%s=%q selects every pod; it must name the job's workers", EnvWorkerSelector, raw))
		default:
			cfg.WorkerSelector = sel.String()
		}
	} else {
		if err := cfg.loadHostfile(env); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}

	if cfg.Namespace == "" {
		data, err := env.readFile(ServiceAccountNamespaceFile)
		if err == nil {
			cfg.Namespace = strings.TrimSpace(string(data))
		}
		if cfg.Namespace == "" && cfg.NeedsWait() {
			if err == nil {
				err = errors.New("file is empty")
			}
			return Config{}, fmt.Errorf("%s is empty and no namespace could be read from %s: %w",
				EnvNamespace, ServiceAccountNamespaceFile, err)
		}
	}
	return cfg, nil
}

// loadHostfile fills in the hostfile fallback fields.
func (c *Config) loadHostfile(env Environment) error {
	c.HostfilePath = orDefault(env.get(EnvHostfile), DefaultHostfile)
	c.PodName = env.get(EnvPodName)
	if c.PodName == "" && env.Hostname != nil {
		if h, err := env.Hostname(); err == nil {
			c.PodName = strings.TrimSpace(h)
		}
	}
	data, err := env.readFile(c.HostfilePath)
	if err != nil {
		return fmt.Errorf("%s is empty, so the workers are taken from the hostfile, but it cannot be read: %w",
			EnvWorkerSelector, err)
	}
	workers, err := ParseHostfile(string(data), c.PodName)
	if err != nil {
		return fmt.Errorf("hostfile %s: %w", c.HostfilePath, err)
	}
	c.HostfileWorkers = workers
	return nil
}

// ParseHostfile returns the pod names listed in an MPI hostfile, one per
// non-empty line of the form "<pod-name> slots=<N>". Lines starting with '#'
// are comments. The entry equal to self (the launcher) is left out, as are
// repeated names. The result is nil when no worker is listed.
func ParseHostfile(content, self string) ([]string, error) {
	var names []string
	seen := map[string]bool{}
	for i, line := range strings.Split(content, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		name := fields[0]
		for _, f := range fields[1:] {
			if value, ok := strings.CutPrefix(f, "slots="); ok {
				if n, err := strconv.Atoi(value); err != nil || n < 0 {
					return nil, fmt.Errorf("line %d: %q has a bad slot count", i+1, line)
				}
			}
		}
		if name == self || seen[name] {
			continue
		}
		seen[name] = true
		names = append(names, name)
	}
	return names, nil
}

func orDefault(value, def string) string {
	if value == "" {
		return def
	}
	return value
}
