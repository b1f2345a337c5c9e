package controller

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// newTestJob returns the job "ns/job" with a launcher that runs mpirun and
// workers without a command, each template with a label and an annotation
// of its own. modify, but for nil ones, runs before the defaults, so that
// it can set what they would fill in. TypeMeta stays empty: objects from a lister have none, and
// the builders must not need it.
func newTestJob(workers int32, modify ...func(*v2beta1.MPIJob)) *v2beta1.MPIJob {
	templateMeta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Labels:      map[string]string{"app.kubernetes.io/name": "trainer"},
			Annotations: map[string]string{"sidecar.istio.io/inject": "false"},
		}
	}
	job := &v2beta1.MPIJob{
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", UID: types.UID("job-uid")},
		Spec: v2beta1.MPIJobSpec{
			MPIReplicaSpecs: map[v2beta1.MPIReplicaType]*v2beta1.ReplicaSpec{
				v2beta1.MPIReplicaTypeLauncher: {Template: corev1.PodTemplateSpec{
					ObjectMeta: templateMeta(),
					Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: "launcher", Image: "mpi:launcher", Command: []string{"mpirun", "python", "train.py"},
					}}},
				}},
				v2beta1.MPIReplicaTypeWorker: {
					Replicas: ptr(workers),
					Template: corev1.PodTemplateSpec{
						ObjectMeta: templateMeta(),
						Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "worker", Image: "mpi:worker"}}},
					},
				},
			},
		},
	}
	for _, m := range modify {
		if m != nil {
			m(job)
		}
	}
	v2beta1.SetDefaults_MPIJob(job)
	return job
}

// testOwners is the ownerReference of every child of newTestJob, written
// out rather than derived from the code under test.
func testOwners() []metav1.OwnerReference {
	return []metav1.OwnerReference{{
		APIVersion:         "kubeflow.org/v2beta1",
		Kind:               "MPIJob",
		Name:               "job",
		UID:                types.UID("job-uid"),
		Controller:         ptr(true),
		BlockOwnerDeletion: ptr(true),
	}}
}

// testChildMeta is the metadata of newTestJob's child named name that is
// not a pod.
func testChildMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       "ns",
		Labels:          map[string]string{"app": "job"},
		OwnerReferences: testOwners(),
	}
}

// TestNewService: the Service selects every pod of the job, the launcher
// too, whatever the implementation, as upstream's does.
func TestNewService(t *testing.T) {
	cases := []struct {
		name   string
		modify func(*v2beta1.MPIJob)
	}{
		{name: "OpenMPI"},
		{name: "OpenMPI with the launcher as a worker", modify: func(j *v2beta1.MPIJob) { j.Spec.RunLauncherAsWorker = ptr(true) }},
		{name: "Intel", modify: func(j *v2beta1.MPIJob) { j.Spec.MPIImplementation = v2beta1.MPIImplementationIntel }},
		{name: "MPICH", modify: func(j *v2beta1.MPIJob) { j.Spec.MPIImplementation = v2beta1.MPIImplementationMPICH }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := newTestJob(2, tc.modify)
			want := &corev1.Service{
				ObjectMeta: testChildMeta("job"),
				Spec: corev1.ServiceSpec{
					ClusterIP: "None",
					Selector: map[string]string{
						"training.kubeflow.org/operator-name": "mpi-operator",
						"training.kubeflow.org/job-name":      "job",
					},
					PublishNotReadyAddresses: true,
				},
			}
			if diff := cmp.Diff(want, newService(job)); diff != "" {
				t.Errorf("newService (-want +got):\n%s", diff)
			}
		})
	}
}

// testSSHKeyPEM is a P-521 key made for this test only by
// `openssl ecparam -name secp521r1 -genkey -noout`, and
// testSSHAuthorizedKey its public key as `ssh-keygen -y -f` prints it: the
// Secret must hold what these tools write and read.
const (
	testSSHKeyPEM = `-----BEGIN EC PRIVATE KEY-----
MIHcAgEBBEIArarJcXMw9hR4Nwsg7cOvLfP28i8zfaXfsveDbNrQm+1ZzMNwOExx
pJJnlIC6/t4lIPp6YeEWZbIDCZylWybdpm+gBwYFK4EEACOhgYkDgYYABAAiM+iJ
GfSXPPmyZzmaWbapTMlZn6uSGru8uRVAGjOzFa82ylQKKeexDsMek/WOggBIDcbk
FXQPq0p0JdYsRkMG7gAiF1xq/OCLxJTFeVU6SHKGjyriyE7qXnC5aaQPl7tqHPdb
WbhvNbL1Msl5EaQg02WchNO/Irj9Dpg4de7sGHaV3A==
-----END EC PRIVATE KEY-----
`
	testSSHAuthorizedKey = "ecdsa-sha2-nistp521 AAAAE2VjZHNhLXNoYTItbmlzdHA1MjEAAAAIbmlzdHA1MjEAAACFBAAiM+iJGfSXPPmyZzmaWbapTMlZn6uSGru8uRVAGjOzFa82ylQKKeexDsMek/WOggBIDcbkFXQPq0p0JdYsRkMG7gAiF1xq/OCLxJTFeVU6SHKGjyriyE7qXnC5aaQPl7tqHPdbWbhvNbL1Msl5EaQg02WchNO/Irj9Dpg4de7sGHaV3A==\n"
)

func TestNewSSHSecret(t *testing.T) {
	block, _ := pem.Decode([]byte(testSSHKeyPEM))
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		t.Fatalf("parsing the test key: %v", err)
	}
	got, err := newSSHSecret(newTestJob(2), key)
	if err != nil {
		t.Fatalf("newSSHSecret: %v", err)
	}
	want := &corev1.Secret{
		ObjectMeta: testChildMeta("job-ssh"),
		Type:       "kubernetes.io/ssh-auth",
		Data: map[string][]byte{
			"ssh-privatekey": []byte(testSSHKeyPEM),
			"ssh-publickey":  []byte(testSSHAuthorizedKey),
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("newSSHSecret (-want +got):\n%s", diff)
	}
}

func TestNewSSHSecretRefusesOtherCurves(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := newSSHSecret(newTestJob(2), key); err == nil {
		t.Errorf("newSSHSecret with a P-224 key, which SSH has no name for: got %v, want an error", s.Data)
	}
}

// generatedSSHSecret is a new key and newTestJob's Secret of it.
func generatedSSHSecret(t *testing.T) (*ecdsa.PrivateKey, *corev1.Secret) {
	t.Helper()
	key, err := generateSSHKey()
	if err != nil {
		t.Fatalf("generateSSHKey: %v", err)
	}
	secret, err := newSSHSecret(newTestJob(2), key)
	if err != nil {
		t.Fatalf("newSSHSecret: %v", err)
	}
	return key, secret
}

// TestGeneratedSSHKeyPair checks that a new Secret's keys parse and belong
// together: the private key signs what the public key verifies.
func TestGeneratedSSHKeyPair(t *testing.T) {
	key, secret := generatedSSHSecret(t)
	if key.Curve != elliptic.P521() {
		t.Errorf("curve %s, want P-521", key.Curve.Params().Name)
	}
	block, rest := pem.Decode(secret.Data["ssh-privatekey"])
	if block == nil || block.Type != "EC PRIVATE KEY" || len(rest) != 0 {
		t.Fatalf("ssh-privatekey is not one EC PRIVATE KEY PEM block: %q", secret.Data["ssh-privatekey"])
	}
	private, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		t.Fatalf("parsing ssh-privatekey: %v", err)
	}
	if !private.Equal(key) {
		t.Error("ssh-privatekey is not the key given")
	}
	public, comment, options, rest, err := ssh.ParseAuthorizedKey(secret.Data["ssh-publickey"])
	if err != nil {
		t.Fatalf("parsing ssh-publickey: %v", err)
	}
	if public.Type() != "ecdsa-sha2-nistp521" || comment != "" || options != nil || len(rest) != 0 {
		t.Errorf("ssh-publickey: type %q, comment %q, options %q, rest %q; want one ecdsa-sha2-nistp521 key alone",
			public.Type(), comment, options, rest)
	}
	signer, err := ssh.NewSignerFromKey(private)
	if err != nil {
		t.Fatalf("SSH signer of ssh-privatekey: %v", err)
	}
	data := []byte("a challenge")
	sig, err := signer.Sign(rand.Reader, data)
	if err != nil {
		t.Fatalf("signing: %v", err)
	}
	if err := public.Verify(data, sig); err != nil {
		t.Errorf("ssh-publickey does not verify what ssh-privatekey signed: %v", err)
	}
	other, err := generateSSHKey()
	if err != nil {
		t.Fatalf("generateSSHKey: %v", err)
	}
	if other.Equal(key) {
		t.Error("two calls of generateSSHKey returned the same key")
	}
}

// TestSSHKeyReadByOpenSSH has OpenSSH read a new Secret's private key and
// derive the public key, which must be the Secret's.
func TestSSHKeyReadByOpenSSH(t *testing.T) {
	keygen, err := exec.LookPath("ssh-keygen")
	if err != nil {
		t.Skip("no ssh-keygen")
	}
	_, secret := generatedSSHSecret(t)
	path := filepath.Join(t.TempDir(), "id_rsa")
	if err := os.WriteFile(path, secret.Data["ssh-privatekey"], 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(keygen, "-y", "-f", path).Output()
	if err != nil {
		t.Fatalf("ssh-keygen -y: %v", err)
	}
	if got, want := strings.TrimSpace(string(out)), string(bytes.TrimSpace(secret.Data["ssh-publickey"])); got != want {
		t.Errorf("ssh-keygen derives %q from ssh-privatekey, the Secret holds %q", got, want)
	}
}
