package plugin

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubeflow/mpi-operator/pkg/version"
)

func newVersionCommand(env *Env) *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version and the MPIJob versions the cluster serves",
		Long: `Print the plugin's version, the cluster's Kubernetes version, and the MPIJob
versions (kubeflow.org/v1, kubeflow.org/v2beta1) it serves, marking the one
the other commands use. --client prints the plugin's version only, without
asking the cluster.`,
		Example: `  kubectl mpijob version
  kubectl mpijob version --client`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runVersion(env, clientOnly)
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print the plugin's version only")
	return cmd
}

func runVersion(env *Env, clientOnly bool) error {
	fmt.Fprintf(env.Out, "Plugin version: %s\n", PluginVersion())
	if clientOnly {
		return nil
	}
	if env.APIVersion != "" {
		if _, err := apiByVersion(env.APIVersion); err != nil {
			return err
		}
	}
	// The clients without a version chosen: a cluster that serves none is
	// what this command is for.
	c, err := env.NewClients()
	if err != nil {
		return err
	}
	disco := c.Kube.Discovery()
	server, err := disco.ServerVersion()
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Out, "Server version: %s\n", server.GitVersion)
	served, err := ServedAPIs(disco)
	if err != nil {
		return err
	}
	used, useErr := chooseAPI(served, env.APIVersion)
	var names []string
	for _, a := range served {
		name := a.GroupVersion().String()
		if useErr == nil && a == used {
			name += " (used)"
		}
		names = append(names, name)
	}
	if len(names) == 0 {
		names = []string{"none: is an MPI operator's CRD installed?"}
	}
	fmt.Fprintf(env.Out, "MPIJob APIs served: %s\n", strings.Join(names, ", "))
	// A version asked for that the server does not serve fails, as every
	// other command would.
	if env.APIVersion != "" {
		return useErr
	}
	return nil
}

// PluginVersion describes the build: the release the linker stamped (see
// pkg/version), else the module version the Go toolchain recorded (a
// pseudo-version from the VCS for a build in a checkout), with the commit,
// the Go version and the platform.
func PluginVersion() string {
	v := version.Version
	if info, ok := debug.ReadBuildInfo(); ok && v == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		v = info.Main.Version
	}
	return fmt.Sprintf("%s (commit %s, %s, %s/%s)", v, version.Commit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
