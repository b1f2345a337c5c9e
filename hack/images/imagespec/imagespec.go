// Package imagespec describes the project's container images: their names,
// contents, configuration and archive files. hack/images builds them from
// this description and test/images checks the archives against it.
package imagespec

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kubeflow/mpi-operator/pkg/delivery"
)

// DefaultRegistry is the registry and name prefix of the project's images,
// the one the manifests and the operators' flag defaults name.
const DefaultRegistry = "ghcr.io/kubeflow/mpi-operator-elastic"

// DefaultTag is the tag the manifests and flag defaults name; every build
// tags its images with it besides the version.
const DefaultTag = "latest"

// NonRootID is the user and group every image runs as, the one of the
// manifests' securityContext.
const NonRootID = 65532

// The annotations of index.json that name an image: the full reference,
// which containerd (ctr import, kind load) and Docker's containerd image
// store read, and the tag alone, as the OCI image layout defines it.
const (
	AnnotationImageName = "io.containerd.image.name"
	AnnotationRefName   = "org.opencontainers.image.ref.name"
)

// Spec describes one image: a static Go binary at /<Name>, its entrypoint.
type Spec struct {
	// Name is the image's name under the registry, and its binary's.
	Name string
	// Module is the directory of the binary's Go module, relative to the
	// repository root; Package is the binary's package within it.
	Module, Package string
	// Description is the image's org.opencontainers.image.description.
	Description string
	// Kubectl makes the image carry the platform's kubectl at KubectlPath.
	Kubectl bool
}

// Images are the project's images, in the order they are built.
var Images = []Spec{
	{
		Name: "mpi-operator", Module: ".", Package: "./cmd/mpi-operator",
		Description: "Operator of kubeflow.org/v1 MPIJobs, with elastic training",
	},
	{
		Name: "mpi-operator-v2", Module: "v2", Package: "./cmd/mpi-operator",
		Description: "Operator of kubeflow.org/v2beta1 MPIJobs, with elastic training",
	},
	{
		Name: "kubectl-delivery", Module: ".", Package: "./cmd/kubectl-delivery",
		Description: "Init container of a v1 MPIJob launcher: installs kubectl and waits for the workers",
		Kubectl:     true,
	},
}

// KubectlPath is where kubectl-delivery finds the kubectl it installs,
// relative to the root.
var KubectlPath = strings.TrimPrefix(delivery.DefaultKubectlSource, "/")

// Entrypoint is the path of the image's binary.
func (s Spec) Entrypoint() string { return "/" + s.Name }

// Repository is the image's name with the registry, without a tag.
func (s Spec) Repository(registry string) string { return path.Join(registry, s.Name) }

// DefaultReference is the reference the manifests and the flag defaults
// give the image: the default registry, tag latest.
func (s Spec) DefaultReference() string { return s.Repository(DefaultRegistry) + ":" + DefaultTag }

// ByName is the image of that name.
func ByName(name string) (Spec, bool) {
	for _, s := range Images {
		if s.Name == name {
			return s, true
		}
	}
	return Spec{}, false
}

// IndexArchive is the file name of the archive with every platform.
func (s Spec) IndexArchive() string { return s.Name + ".tar" }

// PlatformArchive is the file name of the archive of platform p alone.
func (s Spec) PlatformArchive(p v1.Platform) string { return s.Name + "-" + PlatformDir(p) + ".tar" }

// PlatformDir names a platform in file names: linux-amd64.
func PlatformDir(p v1.Platform) string { return p.OS + "-" + p.Architecture }

// User is the image configuration's user: NonRootID, user and group.
func User() string { return fmt.Sprintf("%d:%d", NonRootID, NonRootID) }

// Labels are the OCI labels of an image's configuration.
func (s Spec) Labels(version, commit, source string, created time.Time) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       s.Name,
		"org.opencontainers.image.description": s.Description,
		"org.opencontainers.image.version":     version,
		"org.opencontainers.image.revision":    commit,
		"org.opencontainers.image.source":      source,
		"org.opencontainers.image.created":     created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
}

// DefaultSource is the URL of the sources, the org.opencontainers.image.source label.
const DefaultSource = "https://github.com/kubeflow/mpi-operator"

// ConfigFile is the configuration of the image for platform p, without its
// layers' diff IDs and history: the entrypoint, the non-root user and the
// labels.
func (s Spec) ConfigFile(p v1.Platform, version, commit, source string, created time.Time) *v1.ConfigFile {
	return &v1.ConfigFile{
		Architecture: p.Architecture,
		OS:           p.OS,
		Created:      v1.Time{Time: created},
		Config: v1.Config{
			Entrypoint: []string{s.Entrypoint()},
			User:       User(),
			WorkingDir: "/",
			Labels:     s.Labels(version, commit, source, created),
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
}

// Entry is one file or directory of a layer.
type Entry struct {
	// Path is relative to the root, without a leading or trailing slash.
	Path string
	// Mode holds the permission bits, the sticky bit included.
	Mode int64
	// UID is the owner, and the group too.
	UID int
	// Dir makes the entry a directory; Data is then empty.
	Dir  bool
	Data []byte
}

// Passwd and Group are the image's /etc/passwd and /etc/group: root, and
// the non-root user every image runs as, which os/user can look up.
var (
	Passwd = fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRootID, NonRootID)
	Group  = fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRootID)
)

// LicensePath is where every image carries the project's LICENSE (the
// Apache License 2.0 of its org.opencontainers.image.licenses label),
// relative to the root.
const LicensePath = "licenses/LICENSE"

// BaseEntries are the first layer of every image: the users, the CA
// certificates for TLS, the non-root user's home, the project's license
// and a /tmp.
func BaseEntries(caBundle, license []byte) []Entry {
	return []Entry{
		{Path: "etc", Mode: 0o755, Dir: true},
		{Path: "etc/group", Mode: 0o644, Data: []byte(Group)},
		{Path: "etc/passwd", Mode: 0o644, Data: []byte(Passwd)},
		{Path: "etc/ssl", Mode: 0o755, Dir: true},
		{Path: "etc/ssl/certs", Mode: 0o755, Dir: true},
		{Path: "etc/ssl/certs/ca-certificates.crt", Mode: 0o644, Data: caBundle},
		{Path: "home", Mode: 0o755, Dir: true},
		{Path: "home/nonroot", Mode: 0o700, UID: NonRootID, Dir: true},
		{Path: path.Dir(LicensePath), Mode: 0o755, Dir: true},
		{Path: LicensePath, Mode: 0o644, Data: license},
		{Path: "tmp", Mode: 0o1777, Dir: true},
	}
}

// ExecutableEntries are an executable at file (relative to the root) and
// the directories above it: a layer of its own.
func ExecutableEntries(file string, data []byte) []Entry {
	var out []Entry
	parts := strings.Split(file, "/")
	for i := 1; i < len(parts); i++ {
		out = append(out, Entry{Path: path.Join(parts[:i]...), Mode: 0o755, Dir: true})
	}
	return append(out, Entry{Path: file, Mode: 0o755, Data: data})
}

// EachTarEntry calls f with each entry of the tar stream r, the entry's
// data readable from tr, and stops at the first error.
func EachTarEntry(r io.Reader, f func(hdr *tar.Header, tr *tar.Reader) error) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := f(hdr, tr); err != nil {
			return err
		}
	}
}
