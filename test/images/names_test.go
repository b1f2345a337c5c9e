package images

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubeflow/mpi-operator/cmd/mpi-operator/app"
	"github.com/kubeflow/mpi-operator/hack/images/imagespec"
)

// imageRef is the reference the manifests and flag defaults give an image.
func imageRef(name string) string {
	spec, ok := imagespec.ByName(name)
	if !ok {
		panic("no image " + name)
	}
	return spec.DefaultReference()
}

// TestNames checks that the manifests and the flag defaults name the images
// that `make images` builds, with the user and entrypoint of those images.
func TestNames(t *testing.T) {
	if got, want := app.DefaultKubectlDeliveryImage, imageRef("kubectl-delivery"); got != want {
		t.Errorf("--kubectl-delivery-image defaults to %q, want %q", got, want)
	}
	v1 := operatorContainer(t, filepath.Join("..", "..", "manifests", "base", "deployment.yaml"))
	v2 := operatorContainer(t, filepath.Join("..", "..", "v2", "manifests", "base", "deployment.yaml"))
	nonRoot := int64(imagespec.NonRootID)
	for _, tc := range []struct {
		file string
		got  container
		want container
	}{
		{
			file: "manifests/base/deployment.yaml",
			got:  v1,
			want: container{
				Image: imageRef("mpi-operator"), RunAsUser: &nonRoot, RunAsGroup: &nonRoot,
				// No command: the image's entrypoint, /mpi-operator.
				Args: []string{"--lock-namespace=$(POD_NAMESPACE)", "--monitoring-port=8080", "--metrics-auth=kubernetes",
					"--kubectl-delivery-image=" + imageRef("kubectl-delivery")},
			},
		},
		{
			file: "v2/manifests/base/deployment.yaml",
			got:  v2,
			want: container{
				Image: imageRef("mpi-operator-v2"), RunAsUser: &nonRoot, RunAsGroup: &nonRoot,
				Command: []string{"/mpi-operator-v2"},
				Args:    []string{"--lock-namespace=$(POD_NAMESPACE)", "--monitoring-port=8080", "--metrics-auth=kubernetes"},
			},
		},
	} {
		if diff := cmp.Diff(tc.want, tc.got); diff != "" {
			t.Errorf("%s: the operator's container (-want +got):\n%s", tc.file, diff)
		}
	}
}

// container is what TestNames compares of the operator's container.
type container struct {
	Image                 string
	Command, Args         []string
	RunAsUser, RunAsGroup *int64
}

func operatorContainer(t *testing.T, file string) container {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(data, &d); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	spec := d.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("%s: %d containers, want 1", file, len(spec.Containers))
	}
	c := spec.Containers[0]
	sc := spec.SecurityContext
	if sc == nil {
		sc = &corev1.PodSecurityContext{}
	}
	return container{Image: c.Image, Command: c.Command, Args: c.Args, RunAsUser: sc.RunAsUser, RunAsGroup: sc.RunAsGroup}
}
