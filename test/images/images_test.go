// Package images reads the archives of `make images` back with
// go-containerregistry and checks them against hack/internal/images: the
// index and each platform's image, their configuration, layers and files,
// the manifest.json of docker load, the host platform's binaries run with
// --version, and a second build byte for byte. `make test-images` builds
// both sets of archives first.
package images

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kubeflow/mpi-operator/hack/images/imagespec"
)

// build is what the archives were built from, as hack/images.sh found it.
type build struct {
	dir, again string
	version    string
	commit     string
	created    time.Time
	caBundle   []byte
	// license is the repository's LICENSE, which every image carries.
	license   []byte
	platforms []v1.Platform
}

var b build

func TestMain(m *testing.M) {
	var err error
	if b, err = loadBuild(); err != nil {
		fmt.Fprintf(os.Stderr, "test/images: %v (run make test-images)\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// loadBuild reads the environment that the Makefile's test-images target
// sets, with hack/images.sh's defaults.
func loadBuild() (build, error) {
	out := build{
		dir:       os.Getenv("MPI_OPERATOR_IMAGES"),
		again:     os.Getenv("MPI_OPERATOR_IMAGES_AGAIN"),
		version:   os.Getenv("VERSION"),
		platforms: []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}},
	}
	if env := os.Getenv("IMAGE_PLATFORMS"); env != "" {
		out.platforms = nil
		for _, p := range strings.Fields(env) {
			osName, arch, _ := strings.Cut(p, "/")
			out.platforms = append(out.platforms, v1.Platform{OS: osName, Architecture: arch})
		}
	}
	if out.dir == "" || out.again == "" || out.version == "" {
		return out, errors.New("MPI_OPERATOR_IMAGES, MPI_OPERATOR_IMAGES_AGAIN and VERSION must be set")
	}
	commit, err := git("rev-parse", "HEAD")
	if err != nil {
		return out, err
	}
	out.commit = commit
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		if epoch, err = git("log", "-1", "--format=%ct", "HEAD"); err != nil {
			return out, err
		}
	}
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return out, fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
	}
	out.created = time.Unix(secs, 0).UTC()
	bundle := os.Getenv("CA_BUNDLE")
	if bundle == "" {
		bundle = "/etc/ssl/certs/ca-certificates.crt"
	}
	if out.caBundle, err = os.ReadFile(bundle); err != nil {
		return out, err
	}
	root, err := git("rev-parse", "--show-toplevel")
	if err != nil {
		return out, err
	}
	out.license, err = os.ReadFile(filepath.Join(root, "LICENSE"))
	return out, err
}

func git(args ...string) (string, error) {
	out, err := exec.Command("git", args...).Output()
	return strings.TrimSpace(string(out)), err
}

// openLayout extracts the archive file into a new directory and opens it
// as an OCI image layout.
func openLayout(t *testing.T, file string) layout.Path {
	t.Helper()
	dir := t.TempDir()
	eachTarEntry(t, file, func(hdr *tar.Header, tr *tar.Reader) { extractEntry(t, tr, hdr, dir) })
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatalf("%s is not an OCI image layout: %v", file, err)
	}
	return lp
}

// eachTarEntry calls f with each entry of the archive file of b.dir.
func eachTarEntry(t *testing.T, file string, f func(*tar.Header, *tar.Reader)) {
	t.Helper()
	r, err := os.Open(filepath.Join(b.dir, file))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	err = imagespec.EachTarEntry(r, func(hdr *tar.Header, tr *tar.Reader) error {
		f(hdr, tr)
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

func extractEntry(t *testing.T, tr *tar.Reader, hdr *tar.Header, dir string) {
	t.Helper()
	target := filepath.Join(dir, filepath.FromSlash(hdr.Name))
	if !strings.HasPrefix(target, dir+string(filepath.Separator)) {
		t.Fatalf("archive entry %q leaves the archive", hdr.Name)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := os.MkdirAll(target, 0o755); err != nil {
			t.Fatal(err)
		}
	case tar.TypeReg:
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(target, data, 0o644); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("archive entry %q has type %c", hdr.Name, hdr.Typeflag)
	}
}

// refs are the index.json annotations of spec's image: one entry per tag.
func refs(spec imagespec.Spec) []map[string]string {
	var out []map[string]string
	for _, tag := range []string{b.version, imagespec.DefaultTag} {
		out = append(out, map[string]string{
			imagespec.AnnotationImageName: spec.Repository(imagespec.DefaultRegistry) + ":" + tag,
			imagespec.AnnotationRefName:   tag,
		})
	}
	return out
}

// topDescriptors are index.json's descriptors, with their annotations.
func topDescriptors(t *testing.T, lp layout.Path) []v1.Descriptor {
	t.Helper()
	idx, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	return m.Manifests
}

func annotations(descs []v1.Descriptor) []map[string]string {
	out := make([]map[string]string, 0, len(descs))
	for _, d := range descs {
		out = append(out, d.Annotations)
	}
	return out
}

// layerFile is what a test compares of a tar entry of a layer.
type layerFile struct {
	Name     string
	Typeflag byte
	Mode     int64
	UID, GID int
	ModTime  time.Time
	Size     int64
}

// wantLayers are the entries of each layer of spec's image: the base, the
// platform's kubectl if the image has one, and the binary (its size from
// the archive: the build decides it).
func wantLayers(spec imagespec.Spec, binarySizes map[string]int64) [][]layerFile {
	out := [][]layerFile{entriesFiles(imagespec.BaseEntries(b.caBundle, b.license), nil)}
	if spec.Kubectl {
		out = append(out, entriesFiles(imagespec.ExecutableEntries(imagespec.KubectlPath, nil), binarySizes))
	}
	return append(out, entriesFiles(imagespec.ExecutableEntries(spec.Name, nil), binarySizes))
}

func entriesFiles(entries []imagespec.Entry, sizes map[string]int64) []layerFile {
	out := make([]layerFile, 0, len(entries))
	for _, e := range entries {
		f := layerFile{Name: e.Path, Typeflag: tar.TypeReg, Mode: e.Mode, UID: e.UID, GID: e.UID,
			ModTime: b.created, Size: int64(len(e.Data))}
		if e.Dir {
			f.Name += "/"
			f.Typeflag = tar.TypeDir
		}
		if s, ok := sizes[e.Path]; ok {
			f.Size = s
		}
		out = append(out, f)
	}
	return out
}

// layerContents lists the entries of a layer and keeps the regular files'
// data by path.
func layerContents(t *testing.T, l v1.Layer, data map[string][]byte) []layerFile {
	t.Helper()
	mt, err := l.MediaType()
	if err != nil || mt != types.OCILayer {
		t.Errorf("layer media type %q (%v), want %q", mt, err, types.OCILayer)
	}
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	var out []layerFile
	err = imagespec.EachTarEntry(rc, func(hdr *tar.Header, tr *tar.Reader) error {
		out = append(out, layerFile{Name: hdr.Name, Typeflag: hdr.Typeflag, Mode: hdr.Mode,
			UID: hdr.Uid, GID: hdr.Gid, ModTime: hdr.ModTime.UTC(), Size: hdr.Size})
		if hdr.Typeflag != tar.TypeReg {
			return nil
		}
		var err error
		data[hdr.Name], err = io.ReadAll(tr)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sizes are the sizes of the executables of files.
func sizes(files map[string][]byte) map[string]int64 {
	out := map[string]int64{}
	for name, data := range files {
		out[name] = int64(len(data))
	}
	return out
}

func hostPlatform() v1.Platform {
	return v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}
}

// runExecutable writes data to a file and runs it with args.
func runExecutable(t *testing.T, data []byte, args ...string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(file, data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(file, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// versionLine is what pkg/version prints for the binaries of this build on
// platform p, built by this test's Go toolchain.
func versionLine(p v1.Platform) string {
	return fmt.Sprintf("mpi-operator %s (commit %s, %s, %s/%s)", b.version, b.commit, runtime.Version(), p.OS, p.Architecture)
}

// readAll is the whole of a blob reader.
func readAll(t *testing.T, rc io.ReadCloser, err error) []byte {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func equalFiles(t *testing.T, a, c string) bool {
	t.Helper()
	da, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := os.ReadFile(c)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(da, dc)
}
