package operator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/kubeflow/mpi-operator/pkg/version"
)

// CommandOptions are the options of an operator binary: the shared ones,
// embedded, and its own.
type CommandOptions interface {
	// Shared returns the embedded shared options.
	Shared() *Options
	// Validate reports every invalid setting at once.
	Validate() error
}

// Shared returns o; it makes every type that embeds Options a
// CommandOptions once it validates its own flags.
func (o *Options) Shared() *Options { return o }

// ServeOptions are the settings of Serve that come from the shared flags.
func (o *Options) ServeOptions(leaseName string, kube kubernetes.Interface) ServeOptions {
	return ServeOptions{
		MonitoringPort: o.MonitoringPort,
		MetricsAuth:    o.MetricsAuth,
		Profiling:      o.Profiling,
		LeaderElect:    o.LeaderElect,
		LockNamespace:  o.LockNamespace,
		LeaseName:      leaseName,
		Kube:           kube,
	}
}

// Main is the body of an operator binary's main: it parses args (without
// the program name) with parse, prints the version or validates the
// options, then runs run until SIGTERM or SIGINT starts a graceful stop (a
// second signal kills the process at once). It returns the exit status: 0
// after help, the version or a graceful stop, 2 for bad flags, 1 when run
// fails. Messages go to stderr prefixed with name.
func Main[O CommandOptions](name string, args []string, stdout, stderr io.Writer,
	parse func(args []string, output io.Writer) (O, error), run func(ctx context.Context, o O) error) int {
	defer klog.Flush()
	opts, err := parse(args, stderr)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2 // the error has been printed
	}
	if opts.Shared().PrintVersion {
		fmt.Fprintln(stdout, version.String())
		return 0
	}
	if err := opts.Validate(); err != nil {
		fmt.Fprintf(stderr, "%s: invalid flags:\n%v\n", name, err)
		return 2
	}
	if !opts.Shared().Profiling {
		// Sampling allocations for the heap profile keeps a record per
		// sampled call stack for the life of the process; nothing reads
		// them unless profiles are served.
		runtime.MemProfileRate = 0
	}
	ctx, stop := SignalContext(context.Background())
	defer stop()
	if err := run(ctx, opts); err != nil {
		klog.Flush()
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	klog.InfoS(name + " stopped")
	return 0
}
