package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fixture is a tiny repository: its files, by slash path.
var fixture = map[string]string{
	"README.md": "# Top\n\n## Install\n\n## Upgrading from upstream v0.8.0 / v0.3.0\n\n## Install\n\n" +
		"## The `discover_hosts.sh` file\n\n## *Emphasis* and [a link](docs/a.md)\n\nSetext heading\n--------------\n\n" +
		"<a name=\"custom\"></a>\n",
	"docs/a.md":       "# A\n\n## Section one\n",
	"docs/b.md":       "# B\n",
	"docs/sub/c.md":   "# C\n",
	"pkg/x/file.go":   "package x\n",
	"examples/pi.yml": "kind: MPIJob\n",
}

func writeFixture(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range fixture {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string // docs/sub/test.md
		want []string
	}{
		{name: "relative file", doc: "see [a](../a.md) and [c](c.md)"},
		{name: "directory", doc: "[pkg](../../pkg/x/) and [docs](../)"},
		{name: "root-relative", doc: "[readme](/README.md)"},
		{name: "non-Markdown file", doc: "[pi](../../examples/pi.yml)"},
		{name: "missing file", doc: "[gone](../gone.md)", want: []string{`:1: "../gone.md": no file docs/gone.md`}},
		{name: "outside the repository", doc: "[up](../../../etc/passwd)", want: []string{"points outside the repository"}},
		{name: "anchor in another file", doc: "[s](../a.md#section-one)"},
		{name: "missing anchor", doc: "[s](../a.md#section-two)", want: []string{"docs/a.md has no heading with the anchor #section-two"}},
		{name: "anchor with punctuation", doc: "[u](../../README.md#upgrading-from-upstream-v080--v030)"},
		{name: "duplicate heading", doc: "[i](../../README.md#install) [i2](../../README.md#install-1)"},
		{name: "third of a duplicate that is not there", doc: "[i](../../README.md#install-2)", want: []string{"no heading with the anchor #install-2"}},
		{name: "code in a heading", doc: "[d](../../README.md#the-discover_hostssh-file)"},
		{name: "emphasis and link in a heading", doc: "[e](../../README.md#emphasis-and-a-link)"},
		{name: "setext heading", doc: "[s](../../README.md#setext-heading)"},
		{name: "html anchor", doc: "[h](../../README.md#custom)"},
		{name: "same-file anchor", doc: "# Title\n\n## Here it is\n\n[x](#here-it-is) [y](#title)"},
		{name: "same-file anchor missing", doc: "# Title\n\n[x](#elsewhere)", want: []string{`:3: "#elsewhere": docs/sub/test.md has no heading`}},
		{name: "line anchor of a source file", doc: "[l](../../pkg/x/file.go#L1) [r](../../pkg/x/file.go#L1-L2)"},
		{name: "other anchor of a source file", doc: "[l](../../pkg/x/file.go#main)", want: []string{"neither a line"}},
		{name: "anchor into a directory", doc: "[d](../#a)", want: []string{"an anchor into the directory docs"}},
		{name: "empty anchor", doc: "[e](c.md#)", want: []string{"empty anchor"}},
		{name: "fenced code is not checked", doc: "```sh\n[a](nowhere.md)\n```\n~~~\n[b](nowhere.md)\n~~~\n[c](c.md)"},
		{name: "code spans are not checked", doc: "`[a](nowhere.md)` and ``x `[b](nowhere.md)` y``"},
		{name: "link text across lines", doc: "text [a\nlink](gone.md)", want: []string{`:1: "gone.md": no file`}},
		{name: "line numbers", doc: "one\n\ntwo [x](gone.md)\n\n```\n[y](gone.md)\n```\n[z](gone2.md)", want: []string{`:3: "gone.md"`, `:8: "gone2.md"`}},
		{name: "image", doc: "![pic](missing.png)", want: []string{`"missing.png": no file`}},
		{name: "title", doc: `[t](c.md "C's page")`},
		{name: "reference definition", doc: "[c][ref]\n\n[ref]: gone.md", want: []string{`:3: "gone.md": no file`}},
		{name: "well-formed URLs", doc: "[g](https://github.com/kubeflow/mpi-operator#readme) <https://kind.sigs.k8s.io/> [m](mailto:a@example.com)"},
		{name: "URL without host", doc: "[g](https:///path)", want: []string{"a URL without a host"}},
		{name: "URL with an empty port", doc: "[g](http://example.com:/x)", want: []string{"empty port"}},
		{name: "other scheme", doc: "[f](ftp://example.com/x)", want: []string{"scheme ftp is neither"}},
		{name: "escaped path", doc: "[c](c%2emd)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := writeFixture(t)
			p := filepath.Join(root, "docs", "sub", "test.md")
			if err := os.WriteFile(p, []byte(tc.doc+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			got, _, err := check(root, []string{"docs/sub/test.md"})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d problem(s), want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(got[i], "docs/sub/test.md:") || !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

func TestSlug(t *testing.T) {
	for title, want := range map[string]string{
		"Upgrading from upstream v0.8.0 / v0.3.0": "upgrading-from-upstream-v080--v030",
		"`kubectl mpijob`":                        "kubectl-mpijob",
		"A real MPI run":                          "a-real-mpi-run",
		"Pod options of `submit`":                 "pod-options-of-submit",
		"The `_output` directory":                 "the-_output-directory",
		"**Bold** and _em_":                       "bold-and-em",
		"v1 or v2?":                               "v1-or-v2",
		"Logs, and the tests":                     "logs-and-the-tests",
	} {
		if got := slug(title); got != want {
			t.Errorf("slug(%q) = %q, want %q", title, got, want)
		}
	}
}

func TestDocFiles(t *testing.T) {
	root := writeFixture(t)
	for _, name := range []string{"examples/v1/README.md", "hack/bench/README.md", "test/e2e/testdata/README.md", "hack/.cache/README.md", "v2/README.md", "proposals/p.md", "other/README.md"} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("# x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := docFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"README.md", "docs/a.md", "docs/b.md", "examples/v1/README.md", "hack/bench/README.md", "proposals/p.md", "test/e2e/testdata/README.md", "v2/README.md"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("docFiles = %q, want %q", got, want)
	}
}

// TestRepository checks this repository's documentation, as make
// verify-links does.
func TestRepository(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := docFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	problems, n, err := check(root, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if n == 0 {
		t.Error("no link found in the repository's documentation")
	}
}

// TestREADMECommands keeps the README's first two commands true: the
// first code block of README.md is `make demo` and `make test`, both are
// targets of the Makefile, and .ci/run runs `make test`.
func TestREADMECommands(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var block []string
	in := false
	for _, l := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(l, "```") {
			if in {
				break
			}
			in = true
			continue
		}
		if in {
			cmd, _, _ := strings.Cut(l, "#")
			if cmd = strings.TrimSpace(cmd); cmd != "" {
				block = append(block, cmd)
			}
		}
	}
	if want := []string{"make demo", "make test"}; !reflect.DeepEqual(block, want) {
		t.Fatalf("README.md's first code block runs %q, want %q", block, want)
	}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"demo", "test"} {
		if !strings.Contains("\n"+string(makefile), "\n"+target+":") {
			t.Errorf("the Makefile has no target %s, which README.md's first commands run", target)
		}
	}
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range strings.Split(string(ci), "\n") {
		if strings.TrimSpace(l) == "make test" {
			found = true
		}
	}
	if !found {
		t.Error(".ci/run does not run `make test`, the test command README.md gives")
	}
}
