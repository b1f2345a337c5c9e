// Package plugin is the kubectl plugin `kubectl mpijob`: it submits elastic
// Horovod MPIJobs (kubeflow.org/v1 or v2beta1, whichever the cluster
// serves), shows them with their instances, scales them out and in through
// the scale subresource, and reads their logs, following kubectl's
// conventions for flags and output.
package plugin

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// Clients are what the commands talk to the cluster through.
type Clients struct {
	Kube      kubernetes.Interface
	Dynamic   dynamic.Interface
	Namespace string
	// API is the MPIJob version the commands use: chosen by Env.Clients
	// from what the server serves and --api-version.
	API API
}

// Env is what every command shares: the streams, the clients (made on
// first use from the kubeconfig flags, or set by a test) and the clock.
type Env struct {
	genericiooptions.IOStreams
	ConfigFlags *genericclioptions.ConfigFlags
	// NewClients makes the clients; defaults to reading ConfigFlags. An
	// API it leaves unset is chosen by discovery.
	NewClients func() (*Clients, error)
	// APIVersion is --api-version: the MPIJob version asked for, if any.
	APIVersion string
	// Now is the clock; defaults to time.Now.
	Now func() time.Time
	// Poll is how often waits look again; defaults to 500 ms.
	Poll time.Duration

	clients *Clients
}

// Clients returns the clients, made once, with the MPIJob version chosen
// (chooseAPI).
func (e *Env) Clients() (*Clients, error) {
	if e.clients != nil {
		return e.clients, nil
	}
	if e.APIVersion != "" {
		// A misspelt version is refused before any request.
		if _, err := apiByVersion(e.APIVersion); err != nil {
			return nil, err
		}
	}
	c, err := e.NewClients()
	if err != nil {
		return nil, err
	}
	if c.API == (API{}) {
		served, err := ServedAPIs(c.Kube.Discovery())
		if err != nil {
			return nil, err
		}
		if c.API, err = chooseAPI(served, e.APIVersion); err != nil {
			return nil, err
		}
	}
	e.clients = c
	return c, nil
}

// clientsFromFlags makes the clients as kubectl does: kubeconfig, context,
// namespace and the rest from the standard flags.
func (e *Env) clientsFromFlags() (*Clients, error) {
	cfg, err := restConfig(e.ConfigFlags)
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
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Clients{Kube: kube, Dynamic: dyn, Namespace: ns}, nil
}

// NewCommand returns the root command `kubectl mpijob` with its
// subcommands.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	return newRootCommand(newEnv(streams))
}

// newEnv is the environment of a run from the command line: the clients
// from the kubeconfig flags.
func newEnv(streams genericiooptions.IOStreams) *Env {
	env := &Env{IOStreams: streams, ConfigFlags: genericclioptions.NewConfigFlags(true)}
	env.NewClients = env.clientsFromFlags
	return env
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
		Long: `kubectl mpijob runs elastic Horovod training as MPIJobs of kubeflow.org/v1 or
kubeflow.org/v2beta1.

It submits a job whose horovodrun flags agree with its elastic policy, shows
the job with each of its pods (phase, node, whether discover_hosts.sh lists
it, draining), scales its workers out and in through the scale subresource
and waits for the result, and reads the logs of its launcher or workers.

The version is the one --api-version names, which the cluster must serve;
without it, v1 when the cluster serves it, else v2beta1.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(env.In)
	root.SetOut(env.Out)
	root.SetErr(env.ErrOut)
	if env.ConfigFlags != nil {
		env.ConfigFlags.AddFlags(root.PersistentFlags())
	}
	root.PersistentFlags().StringVar(&env.APIVersion, "api-version", env.APIVersion,
		"MPIJob version to use, v1 or v2beta1 (default: v1 if the cluster serves it, else v2beta1)")
	root.AddCommand(
		newSubmitCommand(env),
		newListCommand(env),
		newGetCommand(env),
		newScaleOutCommand(env),
		newScaleInCommand(env),
		newLogsCommand(env),
		newDeleteCommand(env),
		newVersionCommand(env),
	)
	return root
}

// exactlyOneName is cobra's argument check for commands on one job.
func exactlyOneName(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%s takes exactly one job name, got %d arguments; see '%s --help'", cmd.Name(), len(args), cmd.CommandPath())
	}
	return nil
}
