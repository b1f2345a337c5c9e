package operator

import (
	"fmt"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// BuildRestConfig returns the client configuration: in-cluster when neither
// kubeconfig nor master is given, otherwise from the kubeconfig (several
// paths, separated like $PATH, are merged as kubectl does) with master
// overriding its server. qps, burst and userAgent are applied, and every
// request but a watch is bounded by RequestTimeout. kubeconfigEnv
// names the environment variable that can set the kubeconfig, for the error
// that says none was given.
func BuildRestConfig(kubeconfig, master string, qps float32, burst int, userAgent, kubeconfigEnv string) (*rest.Config, error) {
	var cfg *rest.Config
	if kubeconfig == "" && master == "" {
		c, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeConfig, --master or $%s given, and the in-cluster configuration is not available: %w", kubeconfigEnv, err)
		}
		cfg = c
	} else {
		rules := &clientcmd.ClientConfigLoadingRules{}
		if paths := filepath.SplitList(kubeconfig); len(paths) > 1 {
			rules.Precedence = paths
		} else {
			rules.ExplicitPath = kubeconfig
		}
		overrides := &clientcmd.ConfigOverrides{}
		overrides.ClusterInfo.Server = master
		c, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("loading the client configuration (kubeconfig %q, master %q): %w", kubeconfig, master, err)
		}
		cfg = c
	}
	cfg.QPS = qps
	cfg.Burst = burst
	cfg.UserAgent = userAgent
	cfg.Wrap(withRequestTimeout(RequestTimeout))
	return cfg, nil
}

// ServedResources returns the resource names (subresources included, such
// as "mpijobs/status") the API server serves in groupVersion; an empty map
// when it does not serve the group version at all.
func ServedResources(d discovery.DiscoveryInterface, groupVersion string) (map[string]bool, error) {
	list, err := d.ServerResourcesForGroupVersion(groupVersion)
	if apierrors.IsNotFound(err) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, err
	}
	names := make(map[string]bool, len(list.APIResources))
	for _, r := range list.APIResources {
		names[r.Name] = true
	}
	return names, nil
}
