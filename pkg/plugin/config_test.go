package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/clientcmd"
)

// TestNoConfiguration: without a kubeconfig that names a cluster the
// commands say so, where they looked and how to point at one, instead of
// failing to reach http://localhost:8080; they load the files kubectl
// loads.
func TestNoConfiguration(t *testing.T) {
	// clientcmd reads the home directory once, as the process starts.
	home := t.TempDir()
	defer func(saved string) { clientcmd.RecommendedHomeFile = saved }(clientcmd.RecommendedHomeFile)
	clientcmd.RecommendedHomeFile = filepath.Join(home, ".kube", "config")
	for _, v := range []string{"KUBECONFIG", "KUBERNETES_MASTER", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cluster := `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: t}
contexts:
- name: ctx
  context: {cluster: c, user: u, namespace: ml}
`
	withContext := write("with-context", cluster+"current-context: ctx\n")
	noContext := write("no-context", cluster)
	empty := write("empty", "")
	defaultFile := filepath.Join(home, ".kube", "config")
	noConfig := func(where string) string {
		return "no configuration has been provided: no kubeconfig names a cluster (looked in " + where + ").\n" +
			"Point kubectl mpijob at one as you would kubectl: --kubeconfig FILE, KUBECONFIG=FILE[:FILE...] in the environment, or --server URL"
	}
	cases := []struct {
		name       string
		kubeconfig string // $KUBECONFIG
		args       []string
		want       string // the error; empty for none
	}{
		{name: "nothing", want: noConfig(defaultFile)},
		{name: "KUBECONFIG of files that do not exist", kubeconfig: dir + "/a:" + dir + "/b", want: noConfig("KUBECONFIG=" + dir + "/a:" + dir + "/b")},
		{name: "an empty --kubeconfig", args: []string{"--kubeconfig", empty}, want: noConfig("--kubeconfig " + empty)},
		{name: "a --kubeconfig that does not exist", args: []string{"--kubeconfig", dir + "/nope"}, want: "stat " + dir + "/nope: no such file or directory"},
		{name: "no current context", args: []string{"--kubeconfig", noContext},
			want: "no configuration has been provided: the kubeconfig (--kubeconfig " + noContext + ") sets no current context.\n" +
				"Choose one with --context NAME, or with 'kubectl config use-context NAME'"},
		{name: "--context", args: []string{"--kubeconfig", noContext, "--context", "ctx"}},
		{name: "KUBECONFIG", kubeconfig: dir + "/a:" + withContext},
		{name: "--server", args: []string{"--server", "https://127.0.0.1:1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.kubeconfig != "" {
				t.Setenv("KUBECONFIG", tc.kubeconfig)
			}
			env := newEnv(genericiooptions.NewTestIOStreamsDiscard())
			if err := newRootCommand(env).PersistentFlags().Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			// The clients are made without a request.
			_, made := env.NewClients()
			if tc.want == "" && made != nil || tc.want != "" && (made == nil || made.Error() != tc.want) {
				t.Errorf("error = %v\nwant %q", made, tc.want)
			}
			if tc.want != "" && strings.HasPrefix(tc.want, "no configuration") && !clientcmd.IsEmptyConfig(made) {
				t.Errorf("%v is not clientcmd's empty-configuration error", made)
			}
		})
	}
}
