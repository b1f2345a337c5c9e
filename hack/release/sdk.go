package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/kubeflow/mpi-operator/hack/reprotar"
)

// sdkDir is the Python SDK's project, relative to the repository.
const sdkDir = "sdk/python"

// buildScript runs setuptools' PEP 517 hooks, which Debian's
// python3-setuptools and python3-wheel provide without pip or
// python3-build: an sdist and a wheel into the directory argv[1]. The
// umask is fixed because the wheel keeps the modes of the files setuptools
// writes; the directory is read before the hooks run, as they rewrite
// sys.argv.
const buildScript = `
import os, sys
out = sys.argv[1]
os.umask(0o022)
from setuptools import build_meta
build_meta.build_sdist(out)
build_meta.build_wheel(out)
`

// writeSDK builds the SDK from a copy of its tracked files (so that no
// build/ or egg-info of a developer's checkout gets in), versioned as the
// release, and writes the wheel and the sdist, the latter normalised:
// setuptools' tarball keeps the owners and times of the copy.
func writeSDK(ctx context.Context, o options) error {
	work, err := os.MkdirTemp("", "release-sdk-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }()
	src, dist := filepath.Join(work, "src"), filepath.Join(work, "dist")
	if err := copyTracked(ctx, o.root, sdkDir, src); err != nil {
		return err
	}
	if err := stampSDKVersion(filepath.Join(src, "pyproject.toml"), o.version); err != nil {
		return err
	}
	if err := runBuildScript(ctx, o, src, dist); err != nil {
		return err
	}
	return collectSDK(o, dist)
}

// copyTracked copies the files git tracks under dir of the repository at
// root into to, every file 0644 (setuptools and wheel keep modes).
func copyTracked(ctx context.Context, root, dir, to string) error {
	cmd := exec.CommandContext(ctx, "git", "ls-files", "-z", "--", dir)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("git ls-files %s: %w", dir, err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(name, dir+"/")
		if err := os.MkdirAll(filepath.Join(to, filepath.Dir(rel)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, rel), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// releaseVersion is a release's tag: vX.Y.Z, with a pre-release of PEP 440
// (rc1, a1, b2) if any.
var releaseVersion = regexp.MustCompile(`^v(\d+\.\d+\.\d+(?:(?:a|b|rc)\d+)?)$`)

// projectVersion is pyproject.toml's version line.
var projectVersion = regexp.MustCompile(`(?m)^version = ".*"$`)

// stampSDKVersion gives the package the release's version, when the
// release has a tag's version: a build of any other commit keeps the
// version of pyproject.toml (PEP 440 has no form for git describe's).
func stampSDKVersion(pyproject, version string) error {
	m := releaseVersion.FindStringSubmatch(version)
	if m == nil {
		return nil
	}
	data, err := os.ReadFile(pyproject)
	if err != nil {
		return err
	}
	if !projectVersion.Match(data) {
		return fmt.Errorf("%s has no version line", pyproject)
	}
	data = projectVersion.ReplaceAll(data, []byte("version = "+strconv.Quote(m[1])))
	return os.WriteFile(pyproject, data, 0o644)
}

// runBuildScript runs buildScript in src with the release's time:
// setuptools and wheel date the wheel's entries SOURCE_DATE_EPOCH.
func runBuildScript(ctx context.Context, o options, src, dist string) error {
	cmd := exec.CommandContext(ctx, o.python, "-c", buildScript, dist)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH="+strconv.FormatInt(o.created.Unix(), 10),
		"PYTHONHASHSEED=0", "PYTHONDONTWRITEBYTECODE=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s (setuptools' build hooks; Debian's python3-setuptools and python3-wheel): %w\n%s", o.python, err, out.String())
	}
	return nil
}

// collectSDK writes the wheel and the normalised sdist of dist into the
// release.
func collectSDK(o options, dist string) error {
	wheels, _ := filepath.Glob(filepath.Join(dist, "*.whl"))
	sdists, _ := filepath.Glob(filepath.Join(dist, "*.tar.gz"))
	if len(wheels) != 1 || len(sdists) != 1 {
		return fmt.Errorf("setuptools made %d wheels and %d sdists in %s, want one of each", len(wheels), len(sdists), dist)
	}
	wheel, err := os.ReadFile(wheels[0])
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.out, filepath.Base(wheels[0])), wheel, 0o644); err != nil {
		return err
	}
	in, err := os.Open(sdists[0])
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	var sdist bytes.Buffer
	if err := reprotar.Normalize(in, &sdist, o.created); err != nil {
		return fmt.Errorf("%s: %w", sdists[0], err)
	}
	return os.WriteFile(filepath.Join(o.out, filepath.Base(sdists[0])), sdist.Bytes(), 0o644)
}
