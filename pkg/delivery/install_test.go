package delivery

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"
)

// dirEntries lists the names in dir.
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("reading %s: %v", dir, err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestInstallExecutable(t *testing.T) {
	content := bytes.Repeat([]byte("\x7fELF fake kubectl\n"), 4096)

	cases := map[string]struct {
		// existing, when non-nil, is written at the target before installing.
		existing []byte
		// nested puts the target in a directory that does not exist yet.
		nested bool
	}{
		"fresh target":            {},
		"target directory absent": {nested: true},
		"replaces an old binary":  {existing: []byte("old version")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			srcDir, targetDir := t.TempDir(), t.TempDir()
			if tc.nested {
				targetDir = filepath.Join(targetDir, "opt", "kube")
			}
			src := filepath.Join(srcDir, "kubectl")
			if err := os.WriteFile(src, content, 0o600); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(targetDir, KubectlBinaryName)
			if tc.existing != nil {
				if err := os.WriteFile(dst, tc.existing, 0o644); err != nil {
					t.Fatal(err)
				}
			}

			n, err := InstallExecutable(ctx, src, dst)
			if err != nil {
				t.Fatalf("InstallExecutable: %v", err)
			}
			if n != int64(len(content)) {
				t.Errorf("copied %d bytes, want %d", n, len(content))
			}
			info, err := os.Stat(dst)
			if err != nil {
				t.Fatal(err)
			}
			if got := info.Mode(); got != 0o755 {
				t.Errorf("mode = %v, want -rwxr-xr-x", got)
			}
			got, err := os.ReadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, content) {
				t.Errorf("target content differs from the source (%d bytes vs %d)", len(got), len(content))
			}
			if diff := cmp.Diff([]string{KubectlBinaryName}, dirEntries(t, targetDir)); diff != "" {
				t.Errorf("target directory holds leftovers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInstallExecutableErrors(t *testing.T) {
	cases := map[string]func(t *testing.T, srcDir string) string{
		"missing source": func(t *testing.T, srcDir string) string {
			return filepath.Join(srcDir, "absent")
		},
		"source is a directory": func(t *testing.T, srcDir string) string {
			return srcDir
		},
	}
	for name, source := range cases {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			targetDir := t.TempDir()
			src := source(t, t.TempDir())
			if _, err := InstallExecutable(ctx, src, filepath.Join(targetDir, KubectlBinaryName)); err == nil {
				t.Fatal("InstallExecutable succeeded, want an error")
			}
			if got := dirEntries(t, targetDir); len(got) != 0 {
				t.Errorf("target directory holds %v after a failed install", got)
			}
		})
	}
}

func TestInstallKubectl(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	src := filepath.Join(t.TempDir(), "kubectl")
	if err := os.WriteFile(src, []byte("binary"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := Config{KubectlSource: src, TargetDir: t.TempDir()}
	if err := InstallKubectl(ctx, cfg); err != nil {
		t.Fatalf("InstallKubectl: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(cfg.TargetDir, "kubectl"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "binary" {
		t.Errorf("installed content = %q, want %q", got, "binary")
	}
}
