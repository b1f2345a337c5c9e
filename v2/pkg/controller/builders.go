// Package controller reconciles kubeflow.org/v2beta1 MPIJobs.
//
// The builders of this package are pure: each takes a job that
// v2beta1.SetDefaults_MPIJob has been applied to, and what the sync decided,
// and returns the whole object the job wants in the cluster, controlled by
// the job.
package controller

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// ownerRefs make the job the controller of a child.
func ownerRefs(job *v2beta1.MPIJob) []metav1.OwnerReference {
	return []metav1.OwnerReference{*metav1.NewControllerRef(job, v2beta1.SchemeGroupVersionKind)}
}

// childMeta is the metadata of a child that is not a pod: its name, the
// job's namespace, the label app=<job> and the job as its controller.
func childMeta(job *v2beta1.MPIJob, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       job.Namespace,
		Labels:          map[string]string{labelApp: job.Name},
		OwnerReferences: ownerRefs(job),
	}
}

// newService returns the headless Service that gives every pod of the job
// the name <pod>.<job>.<namespace>.svc: it selects the job's pods by the
// job's name, the launcher as well as the workers, as the upstream
// operator's Service does. Intel MPI's and MPICH's hydra proxies reach the
// launcher by its name, and so may a launcher that is a host of the
// hostfile, or anything written for upstream's pods. discover_hosts.sh is
// not affected: it lists workers only, whatever else the Service's
// EndpointSlices name.
//
// It publishes pods that are not Ready. MPI reaches its hosts by name from
// the moment they run, whatever their readiness probes say, and
// discover_hosts.sh lists Running workers, not Ready ones: a listed worker
// whose name did not resolve would be dropped by Horovod, and a probe that
// fails for a moment would cut the names out from under a running job. The
// readiness that matters, all workers Ready before the launcher starts, is
// the launcher creation policy's to wait for.
func newService(job *v2beta1.MPIJob) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: childMeta(job, serviceName(job)),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 jobLabels(job),
			PublishNotReadyAddresses: true,
		},
	}
}

// generateSSHKey returns a new ECDSA P-521 key for a job's SSH Secret.
func generateSSHKey() (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the SSH key: %w", err)
	}
	return key, nil
}

// newSSHSecret returns the Secret that lets the job's pods reach each other
// over SSH with key: ssh-privatekey in SEC1 PEM ("EC PRIVATE KEY"), which
// OpenSSH reads as it is, and ssh-publickey as an authorized_keys line.
// The line is written by golang.org/x/crypto/ssh, the Go project's own SSH
// library, rather than by hand: it knows the wire format of every key type.
func newSSHSecret(job *v2beta1.MPIJob, key *ecdsa.PrivateKey) (*corev1.Secret, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding the private SSH key: %w", err)
	}
	pub, err := ssh.NewPublicKey(&key.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("encoding the public SSH key: %w", err)
	}
	return &corev1.Secret{
		ObjectMeta: childMeta(job, sshSecretName(job)),
		Type:       corev1.SecretTypeSSHAuth,
		Data: map[string][]byte{
			corev1.SSHAuthPrivateKey: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}),
			sshPublicKeyKey:          ssh.MarshalAuthorizedKey(pub),
		},
	}, nil
}
