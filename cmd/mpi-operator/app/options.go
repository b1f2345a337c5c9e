// Package app holds the mpi-operator command: its flags and the code that
// builds the clients, checks the CRDs and runs the MPIJob controller under
// the leader election and monitoring of pkg/operator.
package app

import (
	"errors"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/kubeflow/mpi-operator/pkg/operator"
)

// Flag defaults of this binary's own flags.
const DefaultKubectlDeliveryImage = "ghcr.io/kubeflow/mpi-operator-elastic/kubectl-delivery:latest"

// Options are the operator's command-line settings: the ones every MPIJob
// operator binary shares, and the v1 controller's own.
type Options struct {
	operator.Options
	// KubectlDeliveryImage is the image of the launcher's init container that
	// brings kubectl.
	KubectlDeliveryImage string
	// RefreshLauncher annotates the launcher pod after each change of
	// discover_hosts.sh so that the kubelet refreshes the mounted file at once.
	RefreshLauncher bool
}

// NewOptions returns the defaults. The namespace default comes from
// KUBEFLOW_NAMESPACE.
func NewOptions() *Options {
	return &Options{
		Options:              operator.NewOptions(),
		KubectlDeliveryImage: DefaultKubectlDeliveryImage,
		RefreshLauncher:      true,
	}
}

// AddFlags registers the operator's flags, klog's (-v, --vmodule, ...) and
// the obsolete flags of upstream's operator on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Options.AddFlags(fs,
		"Scheduler name for gang scheduling with volcano PodGroups (e.g. volcano); empty turns gang scheduling off.")
	fs.StringVar(&o.KubectlDeliveryImage, "kubectl-delivery-image", o.KubectlDeliveryImage,
		"Image of the launcher's init container that delivers kubectl.")
	fs.BoolVar(&o.RefreshLauncher, "refresh-launcher", o.RefreshLauncher,
		"Annotate the launcher pod after each change of discover_hosts.sh, so the kubelet refreshes the file at once instead of at its next periodic sync.")
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

// Validate reports every invalid setting at once.
func (o *Options) Validate() error {
	errs := o.Options.Validate()
	if strings.TrimSpace(o.KubectlDeliveryImage) == "" {
		errs = append(errs, errors.New("--kubectl-delivery-image must not be empty"))
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
