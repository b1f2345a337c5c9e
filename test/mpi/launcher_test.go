package mpi

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// launcher is the launcher pod of a job, materialised on this machine
// under root: each volume of its main container is a directory at
// root+mountPath (root/etc/mpi holds the ConfigMap's files with their
// modes, root/opt/kube the kubectl that kubectl-delivery would copy there,
// root/var/run/secrets/kubernetes.io/serviceaccount a token of the pod's
// ServiceAccount bound to the pod), and every reference to a mount path in
// those files and in the container's environment is rewritten to its
// directory. Nothing else changes: the scripts are the operator's, byte for
// byte but for that prefix.
type launcher struct {
	root       string
	kubeconfig string   // in-cluster kubectl's view of the pod's ServiceAccount files
	command    []string // the main container's command and args
	env        []string // the main container's env, rewritten, plus KUBECONFIG, HOME and PATH
	mounts     []string // mount paths, longest first
}

// materialiseLauncher reads the launcher pod and what its volumes hold
// from the API and lays them out under root.
func materialiseLauncher(ctx context.Context, ns, podName, root string) (*launcher, error) {
	pod, err := env.Kube.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if len(pod.Spec.Containers) != 1 {
		return nil, fmt.Errorf("launcher %s has %d containers, this test runs one", podName, len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	l := &launcher{root: root, command: append(append([]string{}, c.Command...), c.Args...)}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		l.mounts = append(l.mounts, m.MountPath)
	}
	// A mount inside another is rewritten first.
	slices.SortFunc(l.mounts, func(a, b string) int { return len(b) - len(a) })
	var credentials string
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			return nil, fmt.Errorf("launcher %s mounts volume %q that it does not have", podName, m.Name)
		}
		dir := root + m.MountPath
		if err := l.fill(ctx, pod, v, dir); err != nil {
			return nil, fmt.Errorf("volume %s at %s: %w", m.Name, m.MountPath, err)
		}
		if m.MountPath == serviceAccountDir {
			credentials = dir
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			return nil, fmt.Errorf("launcher env %s takes its value from elsewhere; this test reads plain values", e.Name)
		}
		l.env = append(l.env, e.Name+"="+l.rewrite(e.Value))
	}
	if credentials == "" {
		return nil, fmt.Errorf("launcher %s mounts no ServiceAccount credentials at %s", podName, serviceAccountDir)
	}
	if l.kubeconfig, err = inClusterKubeconfig(credentials, root); err != nil {
		return nil, err
	}
	l.env = append(l.env, "KUBECONFIG="+l.kubeconfig, "HOME="+root, "PATH="+os.Getenv("PATH"))
	return l, nil
}

// serviceAccountDir is where a pod finds its ServiceAccount's token, CA and
// namespace, which in-cluster clients read.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// rewrite points the mount paths in s at their directories under root.
func (l *launcher) rewrite(s string) string {
	for _, m := range l.mounts {
		s = strings.ReplaceAll(s, m+"/", l.root+m+"/")
	}
	return s
}

// fill lays out one volume of pod in dir as the kubelet would: a
// ConfigMap's items with their modes, the projected ServiceAccount
// credentials, or, for the emptyDir that kubectl-delivery fills, the
// pinned kubectl.
func (l *launcher) fill(ctx context.Context, pod *corev1.Pod, v corev1.Volume, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	switch {
	case v.ConfigMap != nil:
		return writeConfigMap(ctx, pod.Namespace, v.ConfigMap.Name, v.ConfigMap.Items, dir, l.rewrite)
	case v.Projected != nil:
		for _, src := range v.Projected.Sources {
			if err := fillProjection(ctx, pod, src, dir); err != nil {
				return err
			}
		}
		return nil
	case v.EmptyDir != nil:
		link := filepath.Join(dir, "kubectl")
		_ = os.Remove(link)
		return os.Symlink(env.Kubectl, link)
	default:
		return fmt.Errorf("volume %s is neither a ConfigMap, a projection nor an emptyDir", v.Name)
	}
}

// writeConfigMap writes the items of a ConfigMap to dir, their content
// passed through transform.
func writeConfigMap(ctx context.Context, ns, name string, items []corev1.KeyToPath, dir string, transform func(string) string) error {
	cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, item := range items {
		mode := os.FileMode(0o644)
		if item.Mode != nil {
			mode = os.FileMode(*item.Mode)
		}
		path := filepath.Join(dir, item.Path)
		_ = os.Remove(path) // a read-only file of an earlier fill
		if err := os.WriteFile(path, []byte(transform(cm.Data[item.Key])), mode); err != nil {
			return err
		}
	}
	return nil
}

// fillProjection writes one source of the projected ServiceAccount volume:
// a token bound to the pod, the cluster's CA, the namespace.
func fillProjection(ctx context.Context, pod *corev1.Pod, src corev1.VolumeProjection, dir string) error {
	switch {
	case src.ServiceAccountToken != nil:
		req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: src.ServiceAccountToken.ExpirationSeconds,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		}}
		if a := src.ServiceAccountToken.Audience; a != "" {
			req.Spec.Audiences = []string{a}
		}
		tr, err := env.Kube.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, req, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("a token for ServiceAccount %s/%s: %w", pod.Namespace, pod.Spec.ServiceAccountName, err)
		}
		return os.WriteFile(filepath.Join(dir, src.ServiceAccountToken.Path), []byte(tr.Status.Token), 0o600)
	case src.ConfigMap != nil:
		return writeConfigMap(ctx, pod.Namespace, src.ConfigMap.Name, src.ConfigMap.Items, dir, func(s string) string { return s })
	case src.DownwardAPI != nil:
		for _, item := range src.DownwardAPI.Items {
			if item.FieldRef == nil || item.FieldRef.FieldPath != "metadata.namespace" {
				return fmt.Errorf("downward API item %s: only metadata.namespace is known here", item.Path)
			}
			if err := os.WriteFile(filepath.Join(dir, item.Path), []byte(pod.Namespace), 0o644); err != nil {
				return err
			}
		}
		return nil
	default:
		return fmt.Errorf("a projected source that is neither a token, a ConfigMap nor the downward API")
	}
}

// inClusterKubeconfig writes to dir/kubeconfig what in-cluster kubectl
// would make of the ServiceAccount files in credentials: the pod's token,
// the cluster's CA and the pod's namespace as the default.
func inClusterKubeconfig(credentials, dir string) (string, error) {
	ns, err := os.ReadFile(filepath.Join(credentials, "namespace"))
	if err != nil {
		return "", err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthority: filepath.Join(credentials, "ca.crt")}
	cfg.AuthInfos["launcher"] = &clientcmdapi.AuthInfo{TokenFile: filepath.Join(credentials, "token")}
	cfg.Contexts["launcher"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "launcher", Namespace: string(ns)}
	cfg.CurrentContext = "launcher"
	path := filepath.Join(dir, "kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// run runs argv as the launcher's container would, in root, and returns
// its combined output.
func (l *launcher) run(ctx context.Context, argv ...string) (string, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = l.root
	cmd.Env = l.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// path is where a file of the launcher's file system lies on this machine.
func (l *launcher) path(p string) string { return l.rewrite(p) }

// hostSlots parses "<host> slots=<n>" lines (the hostfile) or "<host>:<n>"
// lines (the output of discover_hosts.sh) into host -> slots, keeping the
// order of the hosts.
func hostSlots(text string) (hosts []string, slots map[string]int, err error) {
	slots = map[string]int{}
	s := bufio.NewScanner(strings.NewReader(text))
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line == "" {
			continue
		}
		host, n, ok := strings.Cut(line, " slots=")
		if !ok {
			host, n, ok = strings.Cut(line, ":")
		}
		count, convErr := strconv.Atoi(n)
		if !ok || convErr != nil || host == "" {
			return nil, nil, fmt.Errorf("line %q is neither \"<host> slots=<n>\" nor \"<host>:<n>\"", line)
		}
		hosts = append(hosts, host)
		slots[host] = count
	}
	return hosts, slots, s.Err()
}

// rank is one line the MPI program prints.
type rank struct {
	Rank, Size int
	Pod        string
	Sum        int64
}

// parseRanks reads the program's "rank=<r> size=<n> pod=<pod> sum=<s>"
// lines out of mpirun's output, which may hold other lines too.
func parseRanks(out string) ([]rank, error) {
	var ranks []rank
	s := bufio.NewScanner(strings.NewReader(out))
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if !strings.HasPrefix(line, "rank=") {
			continue
		}
		var r rank
		if _, err := fmt.Sscanf(line, "rank=%d size=%d pod=%s sum=%d", &r.Rank, &r.Size, &r.Pod, &r.Sum); err != nil {
			return nil, fmt.Errorf("line %q: %w", line, err)
		}
		ranks = append(ranks, r)
	}
	return ranks, s.Err()
}

// summary is what a run of the program amounts to: the world's size, the
// allreduce results seen, and how many ranks each pod ran.
type summary struct {
	Ranks       []int         // the ranks that printed, in order
	Sizes, Sums map[int64]int // value -> how many ranks saw it
	PerPod      map[string]int
}

func summarise(ranks []rank) summary {
	s := summary{Sizes: map[int64]int{}, Sums: map[int64]int{}, PerPod: map[string]int{}}
	seen := make([]bool, len(ranks))
	for _, r := range ranks {
		if r.Rank >= 0 && r.Rank < len(seen) {
			seen[r.Rank] = true
		}
		s.Sizes[int64(r.Size)]++
		s.Sums[r.Sum]++
		s.PerPod[r.Pod]++
	}
	for i, ok := range seen {
		if ok {
			s.Ranks = append(s.Ranks, i)
		}
	}
	return s
}

// expected is the summary of a correct run over hosts with slots: one rank
// per slot, each seeing the world's size and the sum of 1..size.
func expected(slots map[string]int) summary {
	n := 0
	for _, c := range slots {
		n += c
	}
	s := summary{
		Sizes:  map[int64]int{int64(n): n},
		Sums:   map[int64]int{int64(n) * int64(n+1) / 2: n},
		PerPod: map[string]int{},
	}
	for i := 0; i < n; i++ {
		s.Ranks = append(s.Ranks, i)
	}
	for host, c := range slots {
		s.PerPod[host] = c
	}
	return s
}
