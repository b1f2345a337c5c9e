package plugin

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// restConfig is the client configuration of the kubeconfig flags, loaded
// as kubectl loads it, by client-go's clientcmd: the file of --kubeconfig,
// else the files $KUBECONFIG lists, else ~/.kube/config, merged, then
// --context, --cluster, --server and the other flags over them. Where
// client-go, finding no cluster, would fall back to http://localhost:8080
// and fail with a bare connection error, it says that no configuration was
// found, where it looked and how to point at one.
func restConfig(flags *genericclioptions.ConfigFlags) (*rest.Config, error) {
	if err := configFound(flags); err != nil {
		return nil, err
	}
	return flags.ToRESTConfig()
}

// configFound tells whether the flags, the kubeconfig files or the pod the
// plugin runs in give a cluster to talk to.
func configFound(flags *genericclioptions.ConfigFlags) error {
	if flagSet(flags.APIServer) || os.Getenv("KUBERNETES_MASTER") != "" {
		return nil
	}
	loader := flags.ToRawKubeConfigLoader()
	raw, err := loader.RawConfig()
	if err != nil {
		// A --kubeconfig that does not exist or a file that does not
		// parse: clientcmd's words, as kubectl's.
		return err
	}
	if _, err := rest.InClusterConfig(); err == nil {
		return nil
	}
	where := lookedIn(loader.ConfigAccess())
	switch {
	case len(raw.Clusters) == 0:
		return clientcmd.NewEmptyConfigError(fmt.Sprintf(
			"no configuration has been provided: no kubeconfig names a cluster (looked in %s).\n"+
				"Point kubectl mpijob at one as you would kubectl: --kubeconfig FILE, KUBECONFIG=FILE[:FILE...] in the environment, or --server URL", where))
	case raw.CurrentContext == "" && !flagSet(flags.Context) && !flagSet(flags.ClusterName):
		return clientcmd.NewEmptyConfigError(fmt.Sprintf(
			"no configuration has been provided: the kubeconfig (%s) sets no current context.\n"+
				"Choose one with --context NAME, or with 'kubectl config use-context NAME'", where))
	}
	return nil
}

// lookedIn names the kubeconfig files clientcmd reads, and how they were
// chosen.
func lookedIn(access clientcmd.ConfigAccess) string {
	files := access.GetLoadingPrecedence()
	switch {
	case access.IsExplicitFile():
		return "--kubeconfig " + access.GetExplicitFile()
	case os.Getenv(clientcmd.RecommendedConfigPathEnvVar) != "":
		return clientcmd.RecommendedConfigPathEnvVar + "=" + strings.Join(files, string(os.PathListSeparator))
	}
	return strings.Join(files, ", ")
}

func flagSet(p *string) bool { return p != nil && *p != "" }
