package delivery

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeEnv builds an Environment from a map of variables and a map of files.
func fakeEnv(vars, files map[string]string, hostname string) Environment {
	return Environment{
		Getenv: func(k string) string { return vars[k] },
		ReadFile: func(p string) ([]byte, error) {
			content, ok := files[p]
			if !ok {
				return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
			}
			return []byte(content), nil
		},
		Hostname: func() (string, error) {
			if hostname == "" {
				return "", errors.New("no hostname")
			}
			return hostname, nil
		},
	}
}

func TestLoadConfig(t *testing.T) {
	const saFile = ServiceAccountNamespaceFile
	hostfile := "job-launcher slots=1\n\njob-worker-0 slots=2\njob-worker-1 slots=2\njob-worker-0 slots=2\n"

	cases := map[string]struct {
		vars     map[string]string
		files    map[string]string
		hostname string
		want     Config
		wantErrs []string
	}{
		"selector with defaults": {
			vars: map[string]string{
				EnvNamespace:       "team-a",
				EnvWorkerSelector:  "mpi-job-name=foo,mpi-job-role=worker",
				EnvMinReadyWorkers: "2",
			},
			want: Config{
				TargetDir:       DefaultTargetDir,
				KubectlSource:   DefaultKubectlSource,
				Namespace:       "team-a",
				WorkerSelector:  "mpi-job-name=foo,mpi-job-role=worker",
				MinReadyWorkers: 2,
			},
		},
		"explicit paths are cleaned and trimmed": {
			vars: map[string]string{
				EnvTargetDir:      " /shared/kube/ ",
				EnvKubectlSource:  "/usr/local/bin//kubectl",
				EnvNamespace:      "team-a",
				EnvWorkerSelector: " mpi-job-role=worker , mpi-job-name=foo ",
			},
			want: Config{
				TargetDir:      "/shared/kube",
				KubectlSource:  "/usr/local/bin/kubectl",
				Namespace:      "team-a",
				WorkerSelector: "mpi-job-name=foo,mpi-job-role=worker",
			},
		},
		"namespace from the service account": {
			vars: map[string]string{
				EnvWorkerSelector:  "mpi-job-name=foo",
				EnvMinReadyWorkers: "1",
			},
			files: map[string]string{saFile: "team-b\n"},
			want: Config{
				TargetDir:       DefaultTargetDir,
				KubectlSource:   DefaultKubectlSource,
				Namespace:       "team-b",
				WorkerSelector:  "mpi-job-name=foo",
				MinReadyWorkers: 1,
			},
		},
		"no namespace is fine when nothing is awaited": {
			vars: map[string]string{
				EnvWorkerSelector:  "mpi-job-name=foo",
				EnvMinReadyWorkers: "0",
			},
			want: Config{
				TargetDir:      DefaultTargetDir,
				KubectlSource:  DefaultKubectlSource,
				WorkerSelector: "mpi-job-name=foo",
			},
		},
		"no namespace while waiting": {
			vars: map[string]string{
				EnvWorkerSelector:  "mpi-job-name=foo",
				EnvMinReadyWorkers: "3",
			},
			wantErrs: []string{"NAMESPACE is empty", saFile},
		},
		"empty service account namespace while waiting": {
			vars: map[string]string{
				EnvWorkerSelector:  "mpi-job-name=foo",
				EnvMinReadyWorkers: "3",
			},
			files:    map[string]string{saFile: "\n"},
			wantErrs: []string{"NAMESPACE is empty", "file is empty"},
		},
		"minimum is not a number": {
			vars: map[string]string{
				EnvNamespace:       "ns",
				EnvWorkerSelector:  "mpi-job-name=foo",
				EnvMinReadyWorkers: "two",
			},
			wantErrs: []string{`MIN_READY_WORKERS="two" is not an integer`},
		},
		"negative minimum": {
			vars: map[string]string{
				EnvNamespace:       "ns",
				EnvWorkerSelector:  "mpi-job-name=foo",
				EnvMinReadyWorkers: "-1",
			},
			wantErrs: []string{"MIN_READY_WORKERS=-1 must not be negative"},
		},
		"every problem is reported": {
			vars: map[string]string{
				EnvNamespace:       "ns",
				EnvWorkerSelector:  "mpi-job-name in (foo",
				EnvMinReadyWorkers: "x",
			},
			wantErrs: []string{"MIN_READY_WORKERS", "WORKER_SELECTOR=\"mpi-job-name in (foo\" is not a valid label selector"},
		},
		"kubectl cannot be copied onto itself": {
			vars: map[string]string{
				EnvTargetDir:      "/opt/kube",
				EnvKubectlSource:  "/opt/kube/kubectl",
				EnvNamespace:      "ns",
				EnvWorkerSelector: "mpi-job-name=foo",
			},
			wantErrs: []string{"cannot be copied onto itself"},
		},
		"hostfile fallback with POD_NAME": {
			vars: map[string]string{
				EnvNamespace: "ns",
				EnvHostfile:  "/etc/mpi/other-hostfile",
				EnvPodName:   "job-launcher",
			},
			files:    map[string]string{"/etc/mpi/other-hostfile": hostfile},
			hostname: "not-used",
			want: Config{
				TargetDir:       DefaultTargetDir,
				KubectlSource:   DefaultKubectlSource,
				Namespace:       "ns",
				HostfilePath:    "/etc/mpi/other-hostfile",
				PodName:         "job-launcher",
				HostfileWorkers: []string{"job-worker-0", "job-worker-1"},
			},
		},
		"hostfile fallback with the hostname": {
			vars:     map[string]string{EnvNamespace: "ns"},
			files:    map[string]string{DefaultHostfile: hostfile},
			hostname: "job-launcher",
			want: Config{
				TargetDir:       DefaultTargetDir,
				KubectlSource:   DefaultKubectlSource,
				Namespace:       "ns",
				HostfilePath:    DefaultHostfile,
				PodName:         "job-launcher",
				HostfileWorkers: []string{"job-worker-0", "job-worker-1"},
			},
		},
		"hostfile listing only the launcher": {
			vars:  map[string]string{EnvPodName: "job-launcher"},
			files: map[string]string{DefaultHostfile: "job-launcher slots=1\n"},
			want: Config{
				TargetDir:     DefaultTargetDir,
				KubectlSource: DefaultKubectlSource,
				HostfilePath:  DefaultHostfile,
				PodName:       "job-launcher",
			},
		},
		"missing hostfile": {
			vars:     map[string]string{EnvNamespace: "ns"},
			wantErrs: []string{"WORKER_SELECTOR is empty", DefaultHostfile},
		},
		"malformed hostfile": {
			vars:     map[string]string{EnvNamespace: "ns"},
			files:    map[string]string{DefaultHostfile: "job-worker-0 slots=many\n"},
			wantErrs: []string{"hostfile /etc/mpi/hostfile: line 1", "bad slot count"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := LoadConfig(fakeEnv(tc.vars, tc.files, tc.hostname))
			if len(tc.wantErrs) > 0 {
				if err == nil {
					t.Fatalf("LoadConfig succeeded with %+v, want an error", got)
				}
				for _, want := range tc.wantErrs {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not mention %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadConfig: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("config mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigNeedsWait(t *testing.T) {
	cases := map[string]struct {
		cfg  Config
		want bool
	}{
		"selector, zero minimum":   {cfg: Config{WorkerSelector: "a=b"}, want: false},
		"selector, some minimum":   {cfg: Config{WorkerSelector: "a=b", MinReadyWorkers: 1}, want: true},
		"hostfile without workers": {cfg: Config{MinReadyWorkers: 4}, want: false},
		"hostfile with workers":    {cfg: Config{HostfileWorkers: []string{"w"}}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.cfg.NeedsWait(); got != tc.want {
				t.Errorf("NeedsWait() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseHostfile(t *testing.T) {
	cases := map[string]struct {
		content string
		self    string
		want    []string
		wantErr bool
	}{
		"empty": {content: "", want: nil},
		"workers in order": {
			content: "b-worker-1 slots=1\na-worker-0 slots=1\n",
			want:    []string{"b-worker-1", "a-worker-0"},
		},
		"launcher, comments, blanks, duplicates and CRLF": {
			content: "# generated\r\nlauncher slots=1\r\n\r\n  w-0   slots=4  \r\nw-1\r\nw-0 slots=4\r\n",
			self:    "launcher",
			want:    []string{"w-0", "w-1"},
		},
		"bad slot count": {content: "w-0 slots=-2\n", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseHostfile(tc.content, tc.self)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParseHostfile = %v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseHostfile: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("workers mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
