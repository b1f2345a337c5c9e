package harness

import (
	"context"
	"fmt"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Access is one cell of an access matrix: whether a subject may Verb the
// Resource in Namespace ("" asks for every namespace, as only a
// ClusterRole grants). Resource is written as kubectl writes it:
// "pods", "pods/exec", "leases.coordination.k8s.io",
// "mpijobs.kubeflow.org/status".
type Access struct {
	Verb, Resource, Namespace string
	Allowed                   bool
}

// Subject is whom an access matrix is about.
type Subject struct {
	User   string
	Groups []string
}

// ServiceAccount is the subject a pod or a process with the token of the
// ServiceAccount ns/name authenticates as.
func ServiceAccount(ns, name string) Subject {
	return Subject{
		User:   "system:serviceaccount:" + ns + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
}

// CheckAccess asks the API server's authorizer, one SubjectAccessReview a
// cell, whether who may do what each cell says, and returns a line for each
// cell whose answer differs from the cell's Allowed.
func CheckAccess(ctx context.Context, kube kubernetes.Interface, who Subject, cells []Access) ([]string, error) {
	var wrong []string
	for _, c := range cells {
		attrs := resourceAttributes(c)
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: who.User, Groups: who.Groups, ResourceAttributes: &attrs,
		}}
		got, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return wrong, fmt.Errorf("asking whether %s may %s %s: %w", who.User, c.Verb, c.Resource, err)
		}
		if got.Status.Allowed != c.Allowed {
			where := "in every namespace"
			if c.Namespace != "" {
				where = "in namespace " + c.Namespace
			}
			wrong = append(wrong, fmt.Sprintf("%s %s %s: allowed %v, want %v", c.Verb, c.Resource, where, got.Status.Allowed, c.Allowed))
		}
	}
	return wrong, nil
}

func resourceAttributes(c Access) authorizationv1.ResourceAttributes {
	resource, sub, _ := strings.Cut(c.Resource, "/")
	resource, group, _ := strings.Cut(resource, ".")
	return authorizationv1.ResourceAttributes{
		Namespace: c.Namespace, Verb: c.Verb, Group: group, Resource: resource, Subresource: sub,
	}
}

// ExpectAccess fails t for each cell whose answer for who differs, as
// CheckAccess finds them through the admin kubeconfig at path.
func ExpectAccess(t *testing.T, kubeconfig string, who Subject, cells []Access) {
	t.Helper()
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := CheckAccess(context.Background(), kube, who, cells)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range wrong {
		t.Errorf("%s: %s", who.User, w)
	}
}

// User is a subject authenticated as name, in no group of its own.
func User(name string) Subject { return Subject{User: name, Groups: []string{"system:authenticated"}} }
