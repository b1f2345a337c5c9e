// Package app holds the mpi-operator command: its flags and the code that
// builds the clients, checks the CRDs and runs the MPIJob controller under
// the leader election and monitoring of pkg/operator.
package app

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubeflow/mpi-operator/pkg/operator"
)

// Environment variables the operator reads.
const (
	// EnvKubeConfig overrides --kubeConfig when it is set and not empty.
	EnvKubeConfig = "KUBECONFIG"
	// EnvNamespace gives the default of --namespace.
	EnvNamespace = "KUBEFLOW_NAMESPACE"
)

// Flag defaults.
const (
	DefaultThreadiness          = 2
	DefaultKubectlDeliveryImage = "mpioperator/kubectl-delivery:latest"
	DefaultLockNamespace        = "mpi-operator"
	// DefaultKubeAPIQPS and DefaultKubeAPIBurst are forty times upstream's
	// 5/10. A resize costs about 13 writes (the Role, the ConfigMap, the
	// pods, the launcher's annotation, the status), and the operator writes
	// only when jobs change: the budget is spent on bursts, such as many
	// jobs starting at once, where 50 QPS kept discover_hosts.sh seconds
	// behind (hack/bench). The API server's priority and fairness still
	// protects it from any one client.
	DefaultKubeAPIQPS   = 200
	DefaultKubeAPIBurst = 400
)

// Options are the operator's command-line settings.
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
	// KubectlDeliveryImage is the image of the launcher's init container that
	// brings kubectl.
	KubectlDeliveryImage string
	// GangSchedulerName is the scheduler for gang scheduling (volcano
	// PodGroups); empty turns gang scheduling off.
	GangSchedulerName string
	// MonitoringPort serves /metrics and /healthz when > 0.
	MonitoringPort int
	// LockNamespace holds the leader-election Lease.
	LockNamespace string
	// QPS and Burst limit the operator's requests to the API server.
	QPS   float32
	Burst int
	// PrintVersion makes the command print its version and exit.
	PrintVersion bool
	// RefreshLauncher annotates the launcher pod after each change of
	// discover_hosts.sh so that the kubelet refreshes the mounted file at once.
	RefreshLauncher bool
	// LeaderElect runs the controller only while this replica holds the
	// leader Lease.
	LeaderElect bool
}

// NewOptions returns the defaults. The namespace default comes from
// KUBEFLOW_NAMESPACE.
func NewOptions() *Options {
	return &Options{
		Namespace:            os.Getenv(EnvNamespace),
		Threadiness:          DefaultThreadiness,
		KubectlDeliveryImage: DefaultKubectlDeliveryImage,
		LockNamespace:        DefaultLockNamespace,
		QPS:                  DefaultKubeAPIQPS,
		Burst:                DefaultKubeAPIBurst,
		RefreshLauncher:      true,
		LeaderElect:          true,
	}
}

// AddFlags registers the operator's flags, klog's (-v, --vmodule, ...) and
// the obsolete flags of upstream's operator on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.KubeConfig, "kubeConfig", o.KubeConfig,
		"Path to a kubeconfig. Only needed out of cluster. The "+EnvKubeConfig+" environment variable, when set, takes precedence.")
	fs.StringVar(&o.MasterURL, "master", o.MasterURL,
		"Address of the Kubernetes API server; overrides the one in the kubeconfig. Only needed out of cluster.")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace,
		"Namespace to watch for MPIJobs; empty watches all namespaces. Defaults to $"+EnvNamespace+".")
	fs.IntVar(&o.Threadiness, "threadiness", o.Threadiness,
		"Number of MPIJobs reconciled in parallel.")
	fs.StringVar(&o.KubectlDeliveryImage, "kubectl-delivery-image", o.KubectlDeliveryImage,
		"Image of the launcher's init container that delivers kubectl.")
	fs.StringVar(&o.GangSchedulerName, "gang-scheduling", o.GangSchedulerName,
		"Scheduler name for gang scheduling with volcano PodGroups (e.g. volcano); empty turns gang scheduling off.")
	fs.IntVar(&o.MonitoringPort, "monitoring-port", o.MonitoringPort,
		"Port serving /metrics and /healthz; 0 turns the endpoint off.")
	fs.StringVar(&o.LockNamespace, "lock-namespace", o.LockNamespace,
		"Namespace of the leader-election Lease (named mpi-operator). It must exist.")
	fs.Float32Var(&o.QPS, "kube-api-qps", o.QPS,
		"Sustained rate of requests to the Kubernetes API server, per second (upstream default: 5).")
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst,
		"Burst of requests to the Kubernetes API server (upstream default: 10).")
	fs.BoolVar(&o.PrintVersion, "version", o.PrintVersion,
		"Print the version and exit.")
	fs.BoolVar(&o.RefreshLauncher, "refresh-launcher", o.RefreshLauncher,
		"Annotate the launcher pod after each change of discover_hosts.sh, so the kubelet refreshes the file at once instead of at its next periodic sync.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect,
		"Run the controller only while holding the leader Lease, so several replicas can run safely. Turn off only for a single replica.")
	fs.AddGoFlagSet(operator.KlogFlags())
	addObsoleteFlags(fs)
}

// slotsIgnored explains why upstream's per-node resource flags are ignored.
const slotsIgnored = "it is ignored: the slots of each worker come from the MPIJob's spec.slotsPerWorker, " +
	"and its resources from the worker's pod template"

// addObsoleteFlags registers the flags of upstream's v1 operator and Helm
// chart that this operator has no use for. Manifests written for upstream
// still pass them, so they are accepted rather than fatal; pflag hides them
// from the usage and prints their deprecation message when they are used.
func addObsoleteFlags(fs *pflag.FlagSet) {
	fs.Int("gpus-per-node", 0, "Obsolete; ignored.")
	fs.Int("processing-units-per-node", 0, "Obsolete; ignored.")
	fs.String("processing-resource-type", "", "Obsolete; ignored.")
	fs.Bool("enable-gang-scheduling", false, "Obsolete; ignored.")
	for name, why := range map[string]string{
		"gpus-per-node":             slotsIgnored,
		"processing-units-per-node": slotsIgnored,
		"processing-resource-type":  slotsIgnored,
		"enable-gang-scheduling":    "it is ignored: use --gang-scheduling=<scheduler name> (e.g. --gang-scheduling=volcano) to turn gang scheduling on",
	} {
		// MarkDeprecated fails only for an unknown name or an empty message.
		_ = fs.MarkDeprecated(name, why)
	}
}

// Complete fills in values that come from the environment after parsing:
// a non-empty KUBECONFIG replaces --kubeConfig.
func (o *Options) Complete() {
	if kc := os.Getenv(EnvKubeConfig); kc != "" {
		o.KubeConfig = kc
	}
}

// Validate reports every invalid setting at once.
func (o *Options) Validate() error {
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
	if strings.TrimSpace(o.KubectlDeliveryImage) == "" {
		errs = append(errs, errors.New("--kubectl-delivery-image must not be empty"))
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
	return errors.Join(errs...)
}

// ParseArgs builds Options from the command-line arguments (without the
// program name) and the environment. Every long flag may be given with one
// dash or two, as Go's flag package allows, so that command lines written
// for upstream's operator keep working. It does not validate them, so that
// --version and --help work whatever else is on the command line. The
// returned error is pflag.ErrHelp when help was asked for; the usage, or
// the parse error, has then been written to output.
func ParseArgs(args []string, output io.Writer) (*Options, error) {
	o := NewOptions()
	fs := pflag.NewFlagSet("mpi-operator", pflag.ContinueOnError)
	fs.SetOutput(output)
	o.AddFlags(fs)
	if err := operator.ParseFlags(fs, args); err != nil {
		return nil, err // the usage, or the error, has been printed
	}
	o.Complete()
	return o, nil
}
