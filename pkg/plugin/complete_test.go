package plugin

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
)

// TestCompletion completes the job names of the commands on one job, and
// scale-in's --pod with the job's live workers, from the cluster.
func TestCompletion(t *testing.T) {
	directive := ":4\nCompletion ended with directive: ShellCompDirectiveNoFileComp\n"
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"get", ""}, "demo\nfixed\n"},
		{[]string{"get", "de"}, "demo\n"},
		{[]string{"scale-out", "f"}, "fixed\n"},
		{[]string{"scale-in", ""}, "demo\nfixed\n"},
		{[]string{"logs", "d"}, "demo\n"},
		{[]string{"delete", "x"}, ""},
		{[]string{"get", "demo", ""}, ""},
		{[]string{"scale-in", "demo", "--pod", ""}, "demo-worker-0\ndemo-worker-1\n"},
		{[]string{"scale-in", "demo", "--pod", "demo-worker-1"}, "demo-worker-1\n"},
	}
	for _, api := range apis {
		for _, tc := range cases {
			t.Run(api.Version+" "+strings.Join(tc.args, " "), func(t *testing.T) {
				out, err := run(t, fixture(t, api), append([]string{"__complete"}, tc.args...)...)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want+directive, out); diff != "" {
					t.Errorf("__complete %q (-want +got):\n%s", tc.args, diff)
				}
			})
		}
	}
}

// TestVersion prints the plugin's version, the server's and the MPIJob
// versions it serves, the one in use marked.
func TestVersion(t *testing.T) {
	head := "Plugin version: " + PluginVersion() + "\nServer version: v1.35.4\n"
	cases := []struct {
		name    string
		served  []API
		args    []string
		want    string
		wantErr string
	}{
		{name: "both", served: apis, want: head + "MPIJob APIs served: kubeflow.org/v1 (used), kubeflow.org/v2beta1\n"},
		{name: "both, v2beta1 asked", served: apis, args: []string{"--api-version", "v2beta1"},
			want: head + "MPIJob APIs served: kubeflow.org/v1, kubeflow.org/v2beta1 (used)\n"},
		{name: "v2beta1 only", served: []API{APIv2beta1}, want: head + "MPIJob APIs served: kubeflow.org/v2beta1 (used)\n"},
		{name: "none", want: head + "MPIJob APIs served: none: is an MPI operator's CRD installed?\n"},
		{name: "v1 asked, not served", served: []API{APIv2beta1}, args: []string{"--api-version", "v1"},
			want:    head + "MPIJob APIs served: kubeflow.org/v2beta1\n",
			wantErr: "the server does not serve mpijobs in kubeflow.org/v1 (it serves them in: kubeflow.org/v2beta1)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster(t, APIv1, nil, tc.served...)
			disco := f.kube.Discovery().(*fakediscovery.FakeDiscovery)
			if len(tc.served) == 0 {
				disco.Resources = nil
			}
			disco.FakedServerVersion = &version.Info{GitVersion: "v1.35.4"}
			out, err := run(t, f, append([]string{"version"}, tc.args...)...)
			if (err == nil) != (tc.wantErr == "") || err != nil && err.Error() != tc.wantErr {
				t.Errorf("error = %v, want %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, out); diff != "" {
				t.Errorf("version (-want +got):\n%s", diff)
			}
		})
	}
	// --client asks the cluster nothing.
	f := newFakeCluster(t, APIv1, nil)
	out, err := run(t, f, "version", "--client")
	if err != nil || out != "Plugin version: "+PluginVersion()+"\n" {
		t.Errorf("version --client = %q, %v", out, err)
	}
	if n := len(f.actions()); n > 0 {
		t.Errorf("version --client sent %d requests", n)
	}
}
