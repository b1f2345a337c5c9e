// Package app holds the command of the v2beta1 MPIJob operator: its flags
// and the code that builds the clients, checks the CRDs and runs the
// controller under the leader election and monitoring of the root module's
// pkg/operator.
package app

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubeflow/mpi-operator/pkg/operator"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// Options are the operator's command-line settings: the ones every MPIJob
// operator binary shares, and the v2beta1 controller's own.
type Options struct {
	operator.Options
	// ClusterDomain is appended to the host names in the job's files when
	// set, for clusters whose resolvers do not search <ns>.svc.
	ClusterDomain string
	// RefreshLauncher annotates the launcher's pod after each change of
	// discover_hosts.sh so that the kubelet refreshes the mounted file at
	// once.
	RefreshLauncher bool
	// queueRateLimit and queueBurst are upstream's flags of the same names,
	// accepted and unused (see AddFlags).
	queueRateLimit, queueBurst int
}

// NewOptions returns the defaults. The namespace default comes from
// KUBEFLOW_NAMESPACE.
func NewOptions() *Options {
	return &Options{Options: operator.NewOptions(), RefreshLauncher: true}
}

// AddFlags registers the operator's flags and klog's on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Options.AddFlags(fs, "Gang scheduling: volcano for volcano PodGroups, or the name of a scheduler "+
		"with the scheduler-plugins coscheduling plugin for its PodGroups; empty turns gang scheduling off.")
	fs.StringVar(&o.ClusterDomain, "cluster-domain", o.ClusterDomain,
		"Cluster domain appended to the host names in the hostfile and discover_hosts.sh (e.g. cluster.local); empty leaves it out.")
	fs.BoolVar(&o.RefreshLauncher, "refresh-launcher", o.RefreshLauncher,
		"Annotate the launcher's pod after each change of discover_hosts.sh, so the kubelet refreshes the file at once instead of at its next periodic sync.")
	// Upstream's operator rate-limits every event of its queue with these;
	// here only failed syncs are retried with backoff, so they have no
	// use, and manifests that pass them keep working.
	const queueIgnored = "it is ignored: informer events are queued without a rate limit, and only failed syncs back off"
	fs.IntVar(&o.queueRateLimit, "controller-queue-rate-limit", 10, "Upstream's queue rate limit; "+queueIgnored+".")
	fs.IntVar(&o.queueBurst, "controller-queue-burst", 100, "Upstream's queue burst; "+queueIgnored+".")
	for _, name := range []string{"controller-queue-rate-limit", "controller-queue-burst"} {
		// MarkDeprecated fails only for an unknown name or an empty message.
		_ = fs.MarkDeprecated(name, queueIgnored)
	}
}

// Validate reports every invalid setting at once.
func (o *Options) Validate() error {
	errs := o.Options.Validate()
	if d := o.ClusterDomain; d != "" {
		if len(d) > v2beta1.MaxClusterDomain {
			// MaxWorkers is derived from the longest host name.
			errs = append(errs, fmt.Errorf("--cluster-domain may have at most %d characters, got %d", v2beta1.MaxClusterDomain, len(d)))
		} else if msgs := validation.IsDNS1123Subdomain(d); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--cluster-domain %q is not a valid DNS name: %v", d, msgs))
		}
	}
	return errors.Join(errs...)
}

// ParseArgs builds Options from the command-line arguments (without the
// program name) and the environment. Every long flag may be given with one
// dash or two, as Go's flag package allows, so that command lines written
// for upstream's operator keep working. It does not validate them. The
// returned error is pflag.ErrHelp when help was asked for; the usage, or
// the parse error, has then been written to output.
func ParseArgs(args []string, output io.Writer) (*Options, error) {
	o := NewOptions()
	fs := pflag.NewFlagSet("mpi-operator-v2", pflag.ContinueOnError)
	fs.SetOutput(output)
	o.AddFlags(fs)
	if err := operator.ParseFlags(fs, args); err != nil {
		return nil, err
	}
	o.Complete()
	return o, nil
}
