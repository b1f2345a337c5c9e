package operator

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
)

// Environment variables every operator binary reads.
const (
	// EnvKubeConfig overrides --kubeConfig when it is set and not empty.
	EnvKubeConfig = "KUBECONFIG"
	// EnvNamespace gives the default of --namespace.
	EnvNamespace = "KUBEFLOW_NAMESPACE"
)

// Defaults of the shared flags.
const (
	DefaultThreadiness   = 2
	DefaultLockNamespace = "mpi-operator"
	// DefaultKubeAPIQPS and DefaultKubeAPIBurst are forty times upstream's
	// 5/10. A resize costs about a dozen writes (the files, the pods, the
	// launcher's refresh, the status, and for v1 the Role), and the
	// operator writes only when jobs change: the budget is spent on
	// bursts, such as many jobs starting at once, where 50 QPS kept
	// discover_hosts.sh seconds behind (hack/bench). The API server's
	// priority and fairness still protects it from any one client.
	DefaultKubeAPIQPS   = 200
	DefaultKubeAPIBurst = 400
)

// Options are the command-line settings that every MPIJob operator binary
// shares: where the API server is, what to watch, how fast to talk to it,
// leader election and monitoring. A binary embeds them in its own options
// and adds its flags next to them.
type Options struct {
	// KubeConfig is a kubeconfig path (or a list separated by the OS path
	// list separator). Empty, together with an empty MasterURL, means the
	// in-cluster configuration.
	KubeConfig string
	// MasterURL overrides the API server address of the kubeconfig.
	MasterURL string
	// Namespace limits the operator to one namespace; empty means all.
	Namespace string
	// Threadiness is the number of reconcile workers.
	Threadiness int
	// GangSchedulerName is the scheduler for gang scheduling; empty turns
	// gang scheduling off.
	GangSchedulerName string
	// MonitoringPort serves /metrics and /healthz when > 0.
	MonitoringPort int
	// MetricsAuth says who may read the monitoring port's /metrics:
	// MetricsAuthNone (anyone, over HTTP) or MetricsAuthKubernetes.
	MetricsAuth string
	// Profiling serves the Go runtime's profiles on the monitoring port
	// and keeps heap profiling on; off, heap profiling is off too.
	Profiling bool
	// LockNamespace holds the leader-election Lease.
	LockNamespace string
	// QPS and Burst limit the operator's requests to the API server.
	QPS   float32
	Burst int
	// PrintVersion makes the command print its version and exit.
	PrintVersion bool
	// LeaderElect runs the controller only while this replica holds the
	// leader Lease.
	LeaderElect bool
}

// NewOptions returns the defaults. The namespace default comes from
// KUBEFLOW_NAMESPACE.
func NewOptions() Options {
	return Options{
		Namespace:     os.Getenv(EnvNamespace),
		Threadiness:   DefaultThreadiness,
		LockNamespace: DefaultLockNamespace,
		QPS:           DefaultKubeAPIQPS,
		Burst:         DefaultKubeAPIBurst,
		LeaderElect:   true,
		MetricsAuth:   MetricsAuthNone,
	}
}

// AddFlags registers the shared flags and klog's (-v, --vmodule, ...) on
// fs. gangHelp describes --gang-scheduling, whose schedulers differ from
// one binary to the other.
func (o *Options) AddFlags(fs *pflag.FlagSet, gangHelp string) {
	fs.StringVar(&o.KubeConfig, "kubeConfig", o.KubeConfig,
		"Path to a kubeconfig. Only needed out of cluster. The "+EnvKubeConfig+" environment variable, when set, takes precedence.")
	fs.StringVar(&o.MasterURL, "master", o.MasterURL,
		"Address of the Kubernetes API server; overrides the one in the kubeconfig. Only needed out of cluster.")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace,
		"Namespace to watch for MPIJobs; empty watches all namespaces. Defaults to $"+EnvNamespace+".")
	fs.IntVar(&o.Threadiness, "threadiness", o.Threadiness,
		"Number of MPIJobs reconciled in parallel.")
	fs.StringVar(&o.GangSchedulerName, "gang-scheduling", o.GangSchedulerName, gangHelp)
	fs.IntVar(&o.MonitoringPort, "monitoring-port", o.MonitoringPort,
		"Port serving /metrics and /healthz; 0 turns the endpoint off.")
	fs.StringVar(&o.MetricsAuth, "metrics-auth", o.MetricsAuth,
		"Who may read /metrics (and the profiles) on the monitoring port: \"none\", anyone over plain HTTP, as the upstream operator; or \"kubernetes\", over HTTPS with a self-signed certificate, callers whose bearer token the API server authenticates and who may get the path (RBAC nonResourceURLs). /healthz stays open for probes. The manifests use \"kubernetes\".")
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling,
		"Serve the Go runtime's profiles (net/http/pprof) under /debug/pprof/ on the monitoring port. Off, heap profiling is off too, which saves memory.")
	fs.StringVar(&o.LockNamespace, "lock-namespace", o.LockNamespace,
		"Namespace of the leader-election Lease (named mpi-operator). It must exist.")
	fs.Float32Var(&o.QPS, "kube-api-qps", o.QPS,
		"Sustained rate of requests to the Kubernetes API server, per second (upstream default: 5). Events and pod creations each have a budget of this size of their own.")
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst,
		"Burst of requests to the Kubernetes API server (upstream default: 10).")
	fs.BoolVar(&o.PrintVersion, "version", o.PrintVersion,
		"Print the version and exit.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect,
		"Run the controller only while holding the leader Lease, so several replicas can run safely. Turn off only for a single replica.")
	fs.AddGoFlagSet(KlogFlags())
}

// Complete fills in values that come from the environment after parsing:
// a non-empty KUBECONFIG replaces --kubeConfig.
func (o *Options) Complete() {
	if kc := os.Getenv(EnvKubeConfig); kc != "" {
		o.KubeConfig = kc
	}
}

// Validate reports every invalid shared setting.
func (o *Options) Validate() []error {
	var errs []error
	if o.Threadiness < 1 {
		errs = append(errs, fmt.Errorf("--threadiness must be at least 1, got %d", o.Threadiness))
	}
	if !(o.QPS > 0) { // also rejects NaN
		errs = append(errs, fmt.Errorf("--kube-api-qps must be greater than 0, got %v", o.QPS))
	}
	if o.Burst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-burst must be at least 1, got %d", o.Burst))
	}
	if o.MonitoringPort < 0 || o.MonitoringPort > 65535 {
		errs = append(errs, fmt.Errorf("--monitoring-port must be between 1 and 65535, or 0 to turn monitoring off; got %d", o.MonitoringPort))
	}
	switch o.MetricsAuth {
	case "", MetricsAuthNone, MetricsAuthKubernetes:
	default:
		errs = append(errs, fmt.Errorf("--metrics-auth must be %q or %q, got %q", MetricsAuthNone, MetricsAuthKubernetes, o.MetricsAuth))
	}
	if o.Profiling && o.MonitoringPort == 0 {
		errs = append(errs, errors.New("--profiling needs --monitoring-port"))
	}
	if o.Namespace != "" {
		if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--namespace %q is not a valid namespace name: %s", o.Namespace, strings.Join(msgs, "; ")))
		}
	}
	if o.LeaderElect {
		if o.LockNamespace == "" {
			errs = append(errs, errors.New("--lock-namespace must not be empty when --leader-elect is on"))
		} else if msgs := validation.IsDNS1123Label(o.LockNamespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--lock-namespace %q is not a valid namespace name: %s", o.LockNamespace, strings.Join(msgs, "; ")))
		}
	}
	if o.GangSchedulerName != "" {
		if msgs := validation.IsDNS1123Subdomain(o.GangSchedulerName); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--gang-scheduling %q is not a valid scheduler name: %s", o.GangSchedulerName, strings.Join(msgs, "; ")))
		}
	}
	return errs
}

// RestConfig is BuildRestConfig for these options.
func (o *Options) RestConfig(userAgent string) (*rest.Config, error) {
	return BuildRestConfig(o.KubeConfig, o.MasterURL, o.QPS, o.Burst, userAgent, EnvKubeConfig)
}
