// Package plugin is the kubectl plugin `kubectl mpijob`: it submits elastic
// Horovod MPIJobs (kubeflow.org/v1), shows them with their instances,
// scales them out and in through the scale subresource, and reads their
// logs, following kubectl's conventions for flags and output.
package plugin

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	clientset "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned"
)

// Clients are what the commands talk to the cluster through.
type Clients struct {
	Kube      kubernetes.Interface
	MPI       clientset.Interface
	Namespace string
}

// Env is what every command shares: the streams, the clients (made on
// first use from the kubeconfig flags, or set by a test) and the clock.
type Env struct {
	genericiooptions.IOStreams
	ConfigFlags *genericclioptions.ConfigFlags
	// NewClients makes the clients; defaults to reading ConfigFlags.
	NewClients func() (*Clients, error)
	// Now is the clock; defaults to time.Now.
	Now func() time.Time
	// Poll is how often waits look again; defaults to 500 ms.
	Poll time.Duration

	clients *Clients
}

// Clients returns the clients, made once.
func (e *Env) Clients() (*Clients, error) {
	if e.clients != nil {
		return e.clients, nil
	}
	c, err := e.NewClients()
	if err != nil {
		return nil, err
	}
	e.clients = c
	return c, nil
}

// clientsFromFlags makes the clients as kubectl does: kubeconfig, context,
// namespace and the rest from the standard flags.
func (e *Env) clientsFromFlags() (*Clients, error) {
	cfg, err := e.ConfigFlags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	// A wait reads the job, its pods and its ConfigMap twice a second:
	// above client-go's default of 5 requests a second.
	cfg.QPS, cfg.Burst = 20, 40
	ns, _, err := e.ConfigFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mpi, err := clientset.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Clients{Kube: kube, MPI: mpi, Namespace: ns}, nil
}

// NewCommand returns the root command `kubectl mpijob` with its
// subcommands.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	env := &Env{IOStreams: streams, ConfigFlags: genericclioptions.NewConfigFlags(true)}
	env.NewClients = env.clientsFromFlags
	return newRootCommand(env)
}

func newRootCommand(env *Env) *cobra.Command {
	if env.Now == nil {
		env.Now = time.Now
	}
	if env.Poll == 0 {
		env.Poll = 500 * time.Millisecond
	}
	root := &cobra.Command{
		Use:         "kubectl-mpijob",
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl mpijob"},
		Short:       "Submit, watch, scale and read elastic Horovod MPIJobs",
		Long: `kubectl mpijob runs elastic Horovod training as kubeflow.org/v1 MPIJobs.

It submits a job whose horovodrun flags agree with its elastic policy, shows
the job with each of its pods (phase, node, whether discover_hosts.sh lists
it, draining), scales its workers out and in through the scale subresource
and waits for the result, and reads the logs of its launcher or workers.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(env.In)
	root.SetOut(env.Out)
	root.SetErr(env.ErrOut)
	if env.ConfigFlags != nil {
		env.ConfigFlags.AddFlags(root.PersistentFlags())
	}
	root.AddCommand(
		newSubmitCommand(env),
		newListCommand(env),
		newGetCommand(env),
		newScaleOutCommand(env),
		newScaleInCommand(env),
		newLogsCommand(env),
		newDeleteCommand(env),
	)
	return root
}

// getJob reads a job, with a message that says which when it is missing.
func getJob(ctx context.Context, c *Clients, name string) (*kubeflow.MPIJob, error) {
	job, err := c.MPI.KubeflowV1().MPIJobs(c.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("mpijob %q not found in namespace %q", name, c.Namespace)
	}
	return job, err
}

// exactlyOneName is cobra's argument check for commands on one job.
func exactlyOneName(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%s takes exactly one job name, got %d arguments; see '%s --help'", cmd.Name(), len(args), cmd.CommandPath())
	}
	return nil
}
