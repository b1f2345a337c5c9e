package images

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kubeflow/mpi-operator/hack/images/imagespec"
)

// TestIndexArchives reads each multi-platform archive: index.json names
// the image with each tag, the index holds one image per platform, and
// each image is checked whole (checkImage); the host platform's binaries
// run.
func TestIndexArchives(t *testing.T) {
	for _, spec := range imagespec.Images {
		t.Run(spec.Name, func(t *testing.T) {
			lp := openLayout(t, spec.IndexArchive())
			descs := topDescriptors(t, lp)
			if diff := cmp.Diff(refs(spec), annotations(descs)); diff != "" {
				t.Errorf("index.json annotations (-want +got):\n%s", diff)
			}
			for _, d := range descs {
				if d.MediaType != types.OCIImageIndex || d.Digest != descs[0].Digest {
					t.Errorf("index.json names %s %s, want the one OCI image index %s", d.MediaType, d.Digest, descs[0].Digest)
				}
			}
			top, err := lp.ImageIndex()
			if err != nil {
				t.Fatal(err)
			}
			idx, err := top.ImageIndex(descs[0].Digest)
			if err != nil {
				t.Fatal(err)
			}
			m, err := idx.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			var platforms []v1.Platform
			for _, d := range m.Manifests {
				platforms = append(platforms, *d.Platform)
				img, err := idx.Image(d.Digest)
				if err != nil {
					t.Fatal(err)
				}
				files := checkImage(t, spec, *d.Platform, img)
				if d.Platform.Equals(hostPlatform()) {
					checkRuns(t, spec, files)
				}
			}
			if diff := cmp.Diff(b.platforms, platforms); diff != "" {
				t.Errorf("platforms of the index (-want +got):\n%s", diff)
			}
		})
	}
}

// checkImage checks img, spec's image for platform p: media types, the
// whole configuration, and each layer's entries and files. It returns the
// regular files of all layers by path.
func checkImage(t *testing.T, spec imagespec.Spec, p v1.Platform, img v1.Image) map[string][]byte {
	t.Helper()
	mt, err := img.MediaType()
	if err != nil || mt != types.OCIManifestSchema1 {
		t.Errorf("%s: manifest media type %q (%v), want %q", p, mt, err, types.OCIManifestSchema1)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	var got [][]layerFile
	var diffIDs []v1.Hash
	for _, l := range layers {
		got = append(got, layerContents(t, l, files))
		rc, err := l.Uncompressed()
		h, _, err := v1.SHA256(bytes.NewReader(readAll(t, rc, err)))
		if err != nil {
			t.Fatal(err)
		}
		diffIDs = append(diffIDs, h)
	}
	if diff := cmp.Diff(wantLayers(spec, sizes(files)), got); diff != "" {
		t.Errorf("%s: layers (-want +got):\n%s", p, diff)
	}
	checkConfig(t, spec, p, img, diffIDs)
	checkFiles(t, spec, p, files)
	return files
}

// checkConfig compares img's configuration whole, with the layers'
// computed diff IDs.
func checkConfig(t *testing.T, spec imagespec.Spec, p v1.Platform, img v1.Image, diffIDs []v1.Hash) {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	want := spec.ConfigFile(p, b.version, b.commit, imagespec.DefaultSource, b.created)
	want.RootFS.DiffIDs = diffIDs
	if uid, _, _ := strings.Cut(cfg.Config.User, ":"); uid == "" || uid == "0" || uid == "root" {
		t.Errorf("%s: runs as user %q, want a non-root one", p, cfg.Config.User)
	}
	// The history says which step made each layer; its wording is the
	// builder's own.
	for i, h := range cfg.History {
		want.History = append(want.History, v1.History{Created: v1.Time{Time: b.created}, CreatedBy: h.CreatedBy})
		if h.CreatedBy == "" {
			t.Errorf("%s: history %d has no created_by", p, i)
		}
	}
	if len(cfg.History) != len(diffIDs) {
		t.Errorf("%s: %d history entries for %d layers", p, len(cfg.History), len(diffIDs))
	}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("%s: configuration (-want +got):\n%s", p, diff)
	}
}

// checkFiles compares the base files, and checks that each executable is a
// static ELF binary for p.
func checkFiles(t *testing.T, spec imagespec.Spec, p v1.Platform, files map[string][]byte) {
	t.Helper()
	for path, want := range map[string]string{
		"etc/passwd": imagespec.Passwd, "etc/group": imagespec.Group,
		"etc/ssl/certs/ca-certificates.crt": string(b.caBundle),
		imagespec.LicensePath:               string(b.license),
	} {
		if string(files[path]) != want {
			t.Errorf("%s: /%s differs from what the build was given", p, path)
		}
	}
	executables := []string{spec.Name}
	if spec.Kubectl {
		executables = append(executables, imagespec.KubectlPath)
	}
	for _, path := range executables {
		if err := checkELF(files[path], p); err != nil {
			t.Errorf("%s: /%s: %v", p, path, err)
		}
	}
}

var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

func checkELF(data []byte, p v1.Platform) error {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return err
	}
	if f.Machine != elfMachines[p.Architecture] {
		return fmt.Errorf("ELF machine %s, want %s", f.Machine, elfMachines[p.Architecture])
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("dynamically linked")
		}
	}
	return nil
}

// checkRuns runs the image's binary with --version, and kubectl-delivery's
// kubectl with version --client.
func checkRuns(t *testing.T, spec imagespec.Spec, files map[string][]byte) {
	t.Helper()
	p := hostPlatform()
	if got := runExecutable(t, files[spec.Name], "--version"); got != versionLine(p) {
		t.Errorf("%s --version = %q, want %q", spec.Entrypoint(), got, versionLine(p))
	}
	if !spec.Kubectl {
		return
	}
	var got struct {
		ClientVersion struct {
			GitVersion, GitTreeState, BuildDate string
		}
	}
	out := runExecutable(t, files[imagespec.KubectlPath], "version", "--client", "-o", "json")
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("/%s version --client -o json: %v\n%s", imagespec.KubectlPath, err, out)
	}
	if _, err := time.Parse(time.RFC3339, got.ClientVersion.BuildDate); err != nil {
		t.Errorf("/%s: build date %q: %v", imagespec.KubectlPath, got.ClientVersion.BuildDate, err)
	}
	got.ClientVersion.BuildDate = ""
	want := kubeVersion(t)
	if got.ClientVersion.GitVersion != want || got.ClientVersion.GitTreeState != "clean" {
		t.Errorf("/%s version --client: %+v, want %s, clean", imagespec.KubectlPath, got.ClientVersion, want)
	}
}

// kubeVersion is the Kubernetes version hack/lib/versions.sh pins.
func kubeVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "hack", "lib", "versions.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^KUBE_VERSION="([^"]+)"`).FindSubmatch(data)
	if m == nil {
		t.Fatal("no KUBE_VERSION in hack/lib/versions.sh")
	}
	return string(m[1])
}

// TestPlatformArchives reads each one-platform archive twice: as an OCI
// image layout (index.json names the platform's image of the index archive
// with each tag) and through the manifest.json of docker load, by each
// tag, which must give the same configuration and layers.
func TestPlatformArchives(t *testing.T) {
	for _, spec := range imagespec.Images {
		for _, p := range b.platforms {
			t.Run(spec.Name+"/"+imagespec.PlatformDir(p), func(t *testing.T) {
				lp := openLayout(t, spec.PlatformArchive(p))
				descs := topDescriptors(t, lp)
				if diff := cmp.Diff(refs(spec), annotations(descs)); diff != "" {
					t.Errorf("index.json annotations (-want +got):\n%s", diff)
				}
				for _, d := range descs {
					if d.MediaType != types.OCIManifestSchema1 || d.Platform == nil || !d.Platform.Equals(p) || d.Digest != descs[0].Digest {
						t.Errorf("index.json names %s %s for %v, want one OCI manifest for %s", d.MediaType, d.Digest, d.Platform, p)
					}
				}
				img, err := lp.Image(descs[0].Digest)
				if err != nil {
					t.Fatal(err)
				}
				checkImage(t, spec, p, img)
				checkDockerManifest(t, spec, p, img)
			})
		}
	}
}

// checkDockerManifest loads the archive of spec for p through its
// manifest.json by each tag, as docker load does, and compares with img.
func checkDockerManifest(t *testing.T, spec imagespec.Spec, p v1.Platform, img v1.Image) {
	t.Helper()
	file := filepath.Join(b.dir, spec.PlatformArchive(p))
	for _, r := range refs(spec) {
		tag, err := name.NewTag(r[imagespec.AnnotationImageName], name.StrictValidation)
		if err != nil {
			t.Fatal(err)
		}
		loaded, err := tarball.Image(func() (io.ReadCloser, error) { return os.Open(file) }, &tag)
		if err != nil {
			t.Fatalf("manifest.json, %s: %v", tag, err)
		}
		if diff := cmp.Diff(summary(t, img), summary(t, loaded)); diff != "" {
			t.Errorf("manifest.json, %s: image (-layout +manifest.json):\n%s", tag, diff)
		}
	}
}

// summary is the configuration digest and the layers' digests of img.
func summary(t *testing.T, img v1.Image) []v1.Hash {
	t.Helper()
	cfg, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	out := []v1.Hash{cfg}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// TestArchiveEntries checks every archive's own tar headers: owned by
// root, modified at SOURCE_DATE_EPOCH, in lexical order.
func TestArchiveEntries(t *testing.T) {
	for _, file := range archiveFiles(t, b.dir) {
		prev := ""
		eachTarEntry(t, file, func(hdr *tar.Header, _ *tar.Reader) {
			if hdr.Uid != 0 || hdr.Gid != 0 || !hdr.ModTime.Equal(b.created) || hdr.Name <= prev {
				t.Errorf("%s: entry %s: owner %d:%d, modified %s, after %q; want 0:0, %s, in lexical order",
					file, hdr.Name, hdr.Uid, hdr.Gid, hdr.ModTime.UTC(), prev, b.created)
			}
			prev = hdr.Name
		})
	}
}

// TestReproducible compares the archives of two builds byte for byte.
func TestReproducible(t *testing.T) {
	files := archiveFiles(t, b.dir)
	if diff := cmp.Diff(files, archiveFiles(t, b.again)); diff != "" {
		t.Fatalf("archives of the two builds (-first +second):\n%s", diff)
	}
	for _, file := range files {
		if !equalFiles(t, filepath.Join(b.dir, file), filepath.Join(b.again, file)) {
			t.Errorf("%s differs between the two builds", file)
		}
	}
}

// archiveFiles are the archive names in dir; each image's, all there.
func archiveFiles(t *testing.T, dir string) []string {
	t.Helper()
	var want []string
	for _, spec := range imagespec.Images {
		want = append(want, spec.IndexArchive())
		for _, p := range b.platforms {
			want = append(want, spec.PlatformArchive(p))
		}
	}
	matches, err := filepath.Glob(filepath.Join(dir, "*.tar"))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, 0, len(matches))
	for _, m := range matches {
		got = append(got, filepath.Base(m))
	}
	if diff := cmp.Diff(want, got, cmpSorted); diff != "" {
		t.Fatalf("archives in %s (-want +got):\n%s", dir, diff)
	}
	return got
}

var cmpSorted = cmpopts.SortSlices(func(a, c string) bool { return a < c })
