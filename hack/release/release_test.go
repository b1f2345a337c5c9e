package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const (
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	digestC = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
)

func writeImages(t *testing.T, lines ...string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "images.txt")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func testPins(t *testing.T) map[string]string {
	t.Helper()
	pins, err := readPins(writeImages(t,
		"r.example/x/mpi-operator@"+digestA,
		"r.example/x/mpi-operator-v2@"+digestB,
		"r.example/x/kubectl-delivery@"+digestC))
	if err != nil {
		t.Fatal(err)
	}
	return pins
}

// TestPin checks that image fields and the kubectl-delivery flag alike
// name the release's registry by digest.
func TestPin(t *testing.T) {
	doc := `containers:
- args:
  - --kubectl-delivery-image=ghcr.io/kubeflow/mpi-operator-elastic/kubectl-delivery:latest
  image: ghcr.io/kubeflow/mpi-operator-elastic/mpi-operator:latest
`
	got, err := pin([]byte(doc), testPins(t))
	if err != nil {
		t.Fatal(err)
	}
	want := `containers:
- args:
  - --kubectl-delivery-image=r.example/x/kubectl-delivery@` + digestC + `
  image: r.example/x/mpi-operator@` + digestA + `
`
	if string(got) != want {
		t.Errorf("pinned:\n%s\nwant:\n%s", got, want)
	}
}

// TestPinRefusesTags checks that a reference of ours by another tag than
// the manifests' fails the release rather than shipping unpinned.
func TestPinRefusesTags(t *testing.T) {
	for _, doc := range []string{
		"image: ghcr.io/kubeflow/mpi-operator-elastic/mpi-operator:latest\nimage: ghcr.io/kubeflow/mpi-operator-elastic/mpi-operator-v2:v1\n",
		"image: busybox:1\n", // nothing of ours at all
	} {
		if _, err := pin([]byte(doc), testPins(t)); err == nil {
			t.Errorf("pinned %q without an error", doc)
		}
	}
}

func TestReadPinsRefuses(t *testing.T) {
	for name, lines := range map[string][]string{
		"by tag":        {"r/mpi-operator:v1", "r/mpi-operator-v2@" + digestB, "r/kubectl-delivery@" + digestC},
		"unknown image": {"r/other@" + digestA, "r/mpi-operator-v2@" + digestB, "r/kubectl-delivery@" + digestC},
		"one missing":   {"r/mpi-operator@" + digestA, "r/mpi-operator-v2@" + digestB},
	} {
		if _, err := readPins(writeImages(t, lines...)); err == nil {
			t.Errorf("%s: read without an error", name)
		}
	}
}

// TestKrewManifest checks the manifest's URIs and sums, one per archive.
func TestKrewManifest(t *testing.T) {
	o := options{version: "v1.2.3", downloadURL: "https://dl.example/v1.2.3/"}
	archives := [][]byte{[]byte("a"), []byte("b"), []byte("c"), []byte("d")}
	data, err := krewManifest(o, archives)
	if err != nil {
		t.Fatal(err)
	}
	var m krewPlugin
	if err := yaml.UnmarshalStrict(data, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Spec.Platforms) != len(pluginPlatforms) {
		t.Fatalf("%d platforms", len(m.Spec.Platforms))
	}
	darwinArm := m.Spec.Platforms[3]
	if got, want := darwinArm.URI, "https://dl.example/v1.2.3/kubectl-mpijob_v1.2.3_darwin_arm64.tar.gz"; got != want {
		t.Errorf("uri %s, want %s", got, want)
	}
	// sha256("d")
	if got, want := darwinArm.SHA256, "18ac3e7343f016890c510e93f935261169d9e3f565436429830faf0934f4f8e4"; got != want {
		t.Errorf("sha256 %s, want %s", got, want)
	}
	if darwinArm.Selector.MatchLabels["os"] != "darwin" || darwinArm.Selector.MatchLabels["arch"] != "arm64" || darwinArm.Bin != "kubectl-mpijob" {
		t.Errorf("platform %+v", darwinArm)
	}
	// krew's index wants the license installed with the plugin.
	if want := []krewFile{{"kubectl-mpijob", "."}, {"LICENSE", "."}}; !slices.Equal(darwinArm.Files, want) {
		t.Errorf("files %+v, want %+v", darwinArm.Files, want)
	}
}

func TestStampSDKVersion(t *testing.T) {
	for version, want := range map[string]string{
		"v1.2.3":            `version = "1.2.3"`,
		"v1.2.3rc1":         `version = "1.2.3rc1"`,
		"e69ab6d-dirty":     `version = "0.1.0"`,
		"v1.2.3-4-ge69ab6d": `version = "0.1.0"`,
	} {
		file := filepath.Join(t.TempDir(), "pyproject.toml")
		if err := os.WriteFile(file, []byte("[project]\nname = \"mpijob\"\nversion = \"0.1.0\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := stampSDKVersion(file, version); err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(file)
		if !strings.Contains(string(data), "\n"+want+"\n") {
			t.Errorf("%s: pyproject.toml\n%s\nwant %s", version, data, want)
		}
	}
}
