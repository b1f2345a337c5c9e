package release

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// TestReproducible checks that the two releases hold the same files, byte
// for byte, and that checksums.txt lists every other file with its sum.
func TestReproducible(t *testing.T) {
	pushed, dry := readDir(t, env.pushed), readDir(t, env.dry)
	if !slices.Equal(sortedKeys(pushed), sortedKeys(dry)) {
		t.Fatalf("the releases hold different files:\n%v\n%v", sortedKeys(pushed), sortedKeys(dry))
	}
	for file, data := range pushed {
		if !bytes.Equal(data, dry[file]) {
			t.Errorf("%s differs between the two releases", file)
		}
	}
	want := []string{"checksums.txt", "images.txt", "install-v2.yaml", "install.yaml", "mpijob.yaml",
		"mpijob-0.9.0-py3-none-any.whl", "mpijob-0.9.0.tar.gz"}
	for _, p := range []string{"linux_amd64", "linux_arm64", "darwin_amd64", "darwin_arm64"} {
		want = append(want, "kubectl-mpijob_"+version+"_"+p+".tar.gz")
	}
	slices.Sort(want)
	if got := sortedKeys(pushed); !slices.Equal(got, want) {
		t.Errorf("release files:\n got %v\nwant %v", got, want)
	}
	sums := parseChecksums(t, pushed["checksums.txt"])
	for file, data := range pushed {
		if file == "checksums.txt" {
			continue
		}
		if got, want := sums[file], sha256Hex(data); got != want {
			t.Errorf("checksums.txt gives %s sha256 %q, want %q", file, got, want)
		}
	}
	if len(sums) != len(pushed)-1 {
		t.Errorf("checksums.txt lists %d files, the release has %d besides it", len(sums), len(pushed)-1)
	}
}

// TestKrewManifest checks the krew manifest against the archives, and
// what the archives hold: the plugin, stamped with the version, and the
// license, which krew installs beside it.
func TestKrewManifest(t *testing.T) {
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct{ Name string }
		Spec       struct {
			Version          string
			Homepage         string
			ShortDescription string `json:"shortDescription"`
			Description      string
			Platforms        []struct {
				Selector struct{ MatchLabels map[string]string } `json:"selector"`
				URI      string                                  `json:"uri"`
				SHA256   string                                  `json:"sha256"`
				Files    []struct{ From, To string }             `json:"files"`
				Bin      string                                  `json:"bin"`
			}
		}
	}
	if err := yaml.UnmarshalStrict(readFile(t, env.pushed, "mpijob.yaml"), &m); err != nil {
		t.Fatal(err)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "mpijob" || m.Spec.Version != version {
		t.Errorf("manifest: %s %s %s version %s", m.APIVersion, m.Kind, m.Metadata.Name, m.Spec.Version)
	}
	if m.Spec.Homepage == "" || m.Spec.ShortDescription == "" || m.Spec.Description == "" {
		t.Errorf("krew's index wants a homepage and descriptions: %+v", m.Spec)
	}
	var platforms []string
	for _, p := range m.Spec.Platforms {
		osName, arch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		platforms = append(platforms, osName+"/"+arch)
		file := "kubectl-mpijob_" + version + "_" + osName + "_" + arch + ".tar.gz"
		if p.URI != downloadURL+"/"+file {
			t.Errorf("%s/%s: uri %s, want %s/%s", osName, arch, p.URI, downloadURL, file)
		}
		if got := sha256Hex(readFile(t, env.pushed, file)); p.SHA256 != got {
			t.Errorf("%s: sha256 %s in the manifest, %s in fact", file, p.SHA256, got)
		}
		if p.Bin != "kubectl-mpijob" {
			t.Errorf("%s/%s: bin %q", osName, arch, p.Bin)
		}
		want := []struct{ From, To string }{{"kubectl-mpijob", "."}, {"LICENSE", "."}}
		if !slices.Equal(p.Files, want) {
			t.Errorf("%s/%s: files %+v, want %+v (krew's index wants the license installed)", osName, arch, p.Files, want)
		}
		checkPluginArchive(t, file, osName == runtime.GOOS && arch == runtime.GOARCH)
	}
	slices.Sort(platforms)
	if want := []string{"darwin/amd64", "darwin/arm64", "linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Errorf("platforms %v, want %v", platforms, want)
	}
}

// checkPluginArchive checks that the archive holds the repository's
// LICENSE (0644) and the plugin (0755), in that order, as reprotar writes
// them, and, for a build of this machine's platform (native), runs the
// plugin.
func checkPluginArchive(t *testing.T, file string, native bool) {
	t.Helper()
	entries := tarEntries(t, readFile(t, env.pushed, file))
	var got []string
	for _, e := range entries {
		got = append(got, fmt.Sprintf("%s %o", e.hdr.Name, e.hdr.Mode))
	}
	if want := []string{"LICENSE 644", "kubectl-mpijob 755"}; !slices.Equal(got, want) {
		t.Fatalf("%s holds %v, want %v", file, got, want)
	}
	if !bytes.Equal(entries[0].data, readFile(t, env.Root, "LICENSE")) {
		t.Errorf("%s: its LICENSE is not the repository's", file)
	}
	if !native {
		return
	}
	bin := filepath.Join(t.TempDir(), "kubectl-mpijob")
	if err := os.WriteFile(bin, entries[1].data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "version", "--client").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "Plugin version: "+version+" (commit ") {
		t.Errorf("kubectl-mpijob version --client: %v\n%s", err, out)
	}
}

// TestSDK checks that the sdist is normalised, that it and the wheel hold
// the repository's LICENSE, and that the wheel installs with pip, offline,
// and imports.
func TestSDK(t *testing.T) {
	epoch := sourceDateEpoch(t)
	license := readFile(t, env.Root, "LICENSE")
	sdistLicense := false
	for _, e := range tarEntries(t, readFile(t, env.pushed, "mpijob-0.9.0.tar.gz")) {
		h := e.hdr
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(epoch) {
			t.Errorf("sdist entry %s: uid %d gid %d %q %q, time %v; want root's, at %v", h.Name, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime, epoch)
		}
		if h.Name == "mpijob-0.9.0/LICENSE" {
			sdistLicense = h.Typeflag == tar.TypeReg && bytes.Equal(e.data, license)
		}
	}
	if !sdistLicense {
		t.Errorf("the sdist holds no mpijob-0.9.0/LICENSE of the repository's text")
	}
	checkWheelLicense(t, filepath.Join(env.pushed, "mpijob-0.9.0-py3-none-any.whl"), license)
	venv := filepath.Join(t.TempDir(), "venv")
	run(t, "/usr/bin/python3", "-m", "venv", "--system-site-packages", venv)
	run(t, filepath.Join(venv, "bin", "pip"), "install", "--quiet", "--no-index", "--no-deps",
		filepath.Join(env.pushed, "mpijob-0.9.0-py3-none-any.whl"))
	out := run(t, filepath.Join(venv, "bin", "python"), "-c",
		"import importlib.metadata, mpijob; print(importlib.metadata.version('mpijob'), mpijob.__file__)")
	if !strings.HasPrefix(out, "0.9.0 "+venv) {
		t.Errorf("the installed SDK: %s", out)
	}
}

// checkWheelLicense checks that the wheel holds the license in its
// .dist-info, and that its METADATA names it.
func checkWheelLicense(t *testing.T, wheel string, license []byte) {
	t.Helper()
	zr, err := zip.OpenReader(wheel)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = zr.Close() }()
	read := func(name string) []byte {
		f, err := zr.Open(name)
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(wheel), err)
			return nil
		}
		defer func() { _ = f.Close() }()
		data, err := io.ReadAll(f)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	if data := read("mpijob-0.9.0.dist-info/LICENSE"); data != nil && !bytes.Equal(data, license) {
		t.Errorf("the wheel's LICENSE is not the repository's")
	}
	if meta := read("mpijob-0.9.0.dist-info/METADATA"); meta != nil && !bytes.Contains(meta, []byte("\nLicense-File: LICENSE\n")) {
		t.Errorf("the wheel's METADATA names no License-File: LICENSE:\n%s", meta)
	}
}

// TestBundles applies each bundle on the cluster and checks that the
// operator's Deployment, and the pod it makes, run the image pushed, by
// digest, and that the loopback registry serves each image of the release
// as an index of both platforms under that digest and the version's tag.
func TestBundles(t *testing.T) {
	pins := readPins(t)
	for image, ref := range pins {
		checkPushed(t, image, ref)
	}
	for _, b := range []struct{ file, image string }{
		{"install.yaml", "mpi-operator"},
		{"install-v2.yaml", "mpi-operator-v2"},
	} {
		t.Run(b.file, func(t *testing.T) {
			ctx := context.Background()
			// The two operators' Deployments share a name, not their
			// selectors (each keeps the one of the upstream install it
			// replaces), and a selector cannot change: one goes before
			// the other comes.
			err := env.KubectlRun(ctx, "delete", "deployment", "-n", harness.OperatorNamespace, "mpi-operator", "--ignore-not-found", "--wait")
			if err != nil {
				t.Fatal(err)
			}
			if err := env.KubectlRun(ctx, "apply", "--server-side", "-f", filepath.Join(env.pushed, b.file)); err != nil {
				t.Fatal(err)
			}
			dep, err := env.Kube.AppsV1().Deployments(harness.OperatorNamespace).Get(ctx, "mpi-operator", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			c := dep.Spec.Template.Spec.Containers[0]
			if c.Image != pins[b.image] {
				t.Errorf("the Deployment runs %s, want %s", c.Image, pins[b.image])
			}
			if b.image == "mpi-operator" && !slices.Contains(c.Args, "--kubectl-delivery-image="+pins["kubectl-delivery"]) {
				t.Errorf("the operator's args %v do not name kubectl-delivery by its digest", c.Args)
			}
			waitForPod(t, dep, pins[b.image])
		})
	}
}

// checkPushed checks that the registry resolves ref, an image by digest,
// to an index of linux/amd64 and linux/arm64, and the version's tag to the
// same digest.
func checkPushed(t *testing.T, image, ref string) {
	t.Helper()
	digest, err := name.NewDigest(ref)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(digest)
	if err != nil {
		t.Fatalf("%s: %v", ref, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range m.Manifests {
		if d.Platform != nil {
			platforms = append(platforms, d.Platform.String())
		}
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Errorf("%s: platforms %v, want %v", ref, platforms, want)
	}
	tag, err := name.NewTag(env.registry + "/" + image + ":" + version)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(tag)
	if err != nil {
		t.Fatalf("%s: %v", tag, err)
	}
	if desc.Digest.String() != digest.DigestStr() {
		t.Errorf("%s is %s, want %s", tag, desc.Digest, digest.DigestStr())
	}
}

// waitForPod waits for a pod of dep's with image: what the cluster would
// pull.
func waitForPod(t *testing.T, dep *appsv1.Deployment, image string) {
	t.Helper()
	ctx := context.Background()
	sel := metav1.FormatLabelSelector(dep.Spec.Selector)
	var last []string
	err := harness.Poller{Every: 250 * time.Millisecond}.Until(ctx, time.Minute, func() (bool, error) {
		pods, err := env.Kube.CoreV1().Pods(dep.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, err
		}
		last = podImages(pods.Items)
		return slices.Contains(last, image), nil
	})
	if err != nil {
		t.Errorf("no pod of the Deployment runs %s (pods run %v): %v", image, last, err)
	}
}

func podImages(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			out = append(out, p.Spec.Containers[0].Image)
		}
	}
	return out
}

// readPins reads images.txt: each image's reference by digest, by name.
func readPins(t *testing.T) map[string]string {
	t.Helper()
	pins := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(readFile(t, env.pushed, "images.txt")))
	for sc.Scan() {
		ref := sc.Text()
		repo, _, _ := strings.Cut(ref, "@")
		if !strings.HasPrefix(repo, env.registry+"/") {
			t.Errorf("images.txt: %s is not in %s", ref, env.registry)
		}
		pins[strings.TrimPrefix(repo, env.registry+"/")] = ref
	}
	if len(pins) != 3 {
		t.Fatalf("images.txt names %v, want the 3 images", pins)
	}
	return pins
}

func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		files[e.Name()] = readFile(t, dir, e.Name())
	}
	return files
}

func readFile(t *testing.T, dir, file string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// parseChecksums reads sha256sum's lines: "<hex>  <file>".
func parseChecksums(t *testing.T, data []byte) map[string]string {
	t.Helper()
	sums := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		sum, file, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != 64 {
			t.Fatalf("checksums.txt: %q is not sha256sum's", line)
		}
		sums[file] = sum
	}
	return sums
}

type tarEntry struct {
	hdr  *tar.Header
	data []byte
}

func tarEntries(t *testing.T, archive []byte) []tarEntry {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var out []tarEntry
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tarEntry{hdr, data})
	}
}

// sourceDateEpoch is the time of the releases' files: HEAD's commit.
func sourceDateEpoch(t *testing.T) time.Time {
	t.Helper()
	out := run(t, "git", "-C", env.Root, "log", "-1", "--format=%ct", "HEAD")
	sec, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.Unix(sec, 0)
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
