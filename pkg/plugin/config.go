package plugin

import (
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
)

// restConfig is the client configuration of the kubeconfig flags.
func restConfig(flags *genericclioptions.ConfigFlags) (*rest.Config, error) {
	return flags.ToRESTConfig()
}
