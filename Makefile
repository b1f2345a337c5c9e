# Targets CI and developers share. `make test` is what CI runs after
# `make verify`; see README.md.

GO ?= go
export GOFLAGS ?= -mod=mod
BIN := _output/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/kubeflow/mpi-operator/pkg/version.Version=$(VERSION) \
           -X github.com/kubeflow/mpi-operator/pkg/version.GitCommit=$(shell git rev-parse HEAD 2>/dev/null)

.PHONY: all build generate verify verify-gofmt verify-vet verify-codegen verify-tidy lint \
        test test-unit fuzz test-integration test-integration-v2 test-e2e test-e2e-v2 test-chaos test-kueue test-mpi test-plugin test-compat testbin kueue upstream-operator prereqs \
        images test-images release test-release \
        cluster-up cluster-down \
        local-up local-down demo demo-v2 bench bench-v2 clean

all: build

# The binaries are built as the images and the release build them (static,
# without symbol tables), so that the tests and the bench run, and measure,
# what ships.
build: export CGO_ENABLED=0
build:
	$(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $(BIN)/mpi-operator ./cmd/mpi-operator
	$(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $(BIN)/kubectl-delivery ./cmd/kubectl-delivery
	$(GO) build -trimpath -ldflags "-s -w" -o $(BIN)/kubectl-mpijob ./cmd/kubectl-mpijob
	cd v2 && $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o ../$(BIN)/mpi-operator-v2 ./cmd/mpi-operator

# The SDK ships a copy of the job builders' defaults (pkg/jobdefaults,
# docs/job-defaults.md) that the plugin embeds.
JOB_DEFAULTS := pkg/jobdefaults/job-defaults.json
SDK_JOB_DEFAULTS := sdk/python/mpijob/job-defaults.json

generate:
	hack/update-codegen.sh
	/usr/bin/python3 hack/sdkgen/sdkgen.py
	cp $(JOB_DEFAULTS) $(SDK_JOB_DEFAULTS)
	/usr/bin/python3 hack/sdkgen/apidoc.py

verify: verify-gofmt verify-vet verify-tidy verify-codegen lint verify-sdk verify-links

verify-gofmt:
	@out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# v2/ is a module of its own (the kubeflow.org/v2beta1 API): each check
# runs in both modules.
verify-vet:
	$(GO) vet ./...
	cd v2 && $(GO) vet ./...

verify-tidy:
	@for dir in . v2; do \
	  (cd $$dir && cp go.mod _go.mod.bak && cp go.sum _go.sum.bak && \
	   $(GO) mod tidy; \
	   ok=0; diff -u _go.mod.bak go.mod && diff -u _go.sum.bak go.sum || ok=1; \
	   mv _go.mod.bak go.mod; mv _go.sum.bak go.sum; \
	   if [ $$ok -ne 0 ]; then echo "$$dir/go.mod, go.sum are not tidy: run go mod tidy in $$dir"; exit 1; fi) || exit 1; \
	done

verify-codegen:
	hack/verify-codegen.sh

lint:
	lint=$$(hack/tools.sh golangci-lint) && $$lint run ./... && cd v2 && $$lint run ./...

test: test-unit test-images test-integration test-integration-v2 test-e2e test-e2e-v2 test-chaos test-kueue test-mpi test-sdk test-plugin test-release test-compat

# The v2 module's tests but its suites on a control plane (v2/test).
test-unit: fuzz
	$(GO) test -race -cover ./pkg/... ./cmd/... ./hack/...
	cd v2 && $(GO) test -race -cover $$($(GO) list ./... | grep -v '^github.com/kubeflow/mpi-operator/v2/test/')

# Each fuzz test for a bounded number of inputs (go test runs only their
# seeds). A count, not a duration: Go 1.26's coordinator can fail a target
# whose -fuzztime deadline expires mid-call (golang/go#75804).
FUZZ_PLAN ?= 30000x
FUZZ_SYNC ?= 20000x
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzPlanWorkers$$' -fuzztime $(FUZZ_PLAN) -fuzzminimizetime 200x ./pkg/elastic
	$(GO) test -run '^$$' -fuzz '^FuzzSync$$' -fuzztime $(FUZZ_SYNC) -fuzzminimizetime 200x ./pkg/controller

# Every suite starts a control plane of its own (hack/cluster-up.sh, through
# test/harness) on ports free at its start, so that suites run side by
# side; the first run builds it (hack/testbin.sh).
test-integration: testbin
	$(GO) test -count=1 -timeout 30m ./test/integration/...

# The v2 CRD and controller on a control plane of its own
# (_output/integration-v2): admission, the scale subresource, kubectl
# explain, the overlays, upgrades of the CRD, and the controller in-process
# (children, elastic scaling, replacement, suspend and resume, adoption).
test-integration-v2: testbin
	cd v2 && $(GO) test -count=1 -timeout 20m ./test/integration/...

test-e2e: testbin build
	$(GO) test -count=1 -timeout 30m ./test/e2e/...

# The v2 operator's binary on a control plane of its own (_output/e2e-v2):
# the v2beta1 examples with kubectl, scale, suspend and resume, monitoring,
# SIGTERM, upgrades in place from upstream v0.8.0 and v0.3.0, and the
# takeover of the jobs that upstream v0.8.0's own operator (built by
# hack/upstream-operator.sh) runs.
test-e2e-v2: testbin build upstream-operator
	cd v2 && $(GO) test -count=1 -timeout 20m ./test/e2e/...

# The short chaos run (hack/chaos/README.md): SIGKILLs of the leading
# replica and an API server restart while elastic jobs are scaled, on a
# control plane of its own; about 3.5 minutes on 2 cores.
test-chaos: testbin build
	$(GO) run ./hack/chaos --short

# kubectl-mpijob run as a user runs it, against the operator binary on a
# control plane of its own (_output/plugin-e2e): submit, list, get --watch,
# scale-out (and its rollback on a timeout), scale-in, logs, delete.
test-plugin: testbin build
	$(GO) test -count=1 -timeout 15m ./test/plugin/...

# Kueue's own manager (sigs.k8s.io/kueue, each version of KUEUE_VERSIONS,
# built by hack/kueue.sh) admitting suspended elastic v2beta1 MPIJobs
# against a ClusterQueue quota, with the v2 controller in-process, on a
# control plane of its own per version (_output/kueue-<version>); about a
# minute per version once built (the first build of each manager takes
# 6 to 15 minutes, by the machine's load; v0.17.0 is 7 CPU-minutes).
KUEUE_VERSIONS ?= v0.12.3 v0.17.0
test-kueue: testbin kueue
	@for v in $(KUEUE_VERSIONS); do \
	  echo "test-kueue: Kueue $$v"; \
	  (cd v2 && KUEUE_VERSION=$$v $(GO) test -count=1 -timeout 15m ./test/kueue/...) || exit 1; \
	done

# Debian's Open MPI runs mpirun through the operator's kubexec.sh, as the
# launcher's ServiceAccount, into workers on kwok nodes that serve exec and
# logs (KWOK_SERVER_PORT), on a control plane of its own (_output/mpi);
# about a minute and a half (test/mpi).
test-mpi: testbin build
	$(GO) test -count=1 -timeout 10m ./test/mpi/...

# The v1 and v2 installs and operators on the other Kubernetes versions of
# hack/lib/versions.sh (KUBE_COMPAT_VERSIONS: the oldest minor the README
# claims and the newest release), each on a control plane of that version
# with its kubectl (hack/test-compat.sh, docs/compatibility.md): the e2e
# suites' user path and the CRD tests of the integration suites.
# COMPAT_VERSIONS=<version> picks one.
test-compat: build prereqs
	hack/test-compat.sh

kueue: prereqs
	@for v in $(KUEUE_VERSIONS); do KUEUE_VERSION=$$v hack/kueue.sh > /dev/null || exit 1; done

# Upstream v0.8.0's operator, built once from the Go module proxy into
# ~/.cache/mpi-operator/upstream-operator (about 3.5 minutes cold).
upstream-operator: prereqs
	hack/upstream-operator.sh > /dev/null

# The images of the operators and kubectl-delivery as archives in
# _output/images, for linux/amd64 and linux/arm64, without a container
# engine (hack/images.sh, docs/images.md). The first run builds
# kubectl for both platforms into ~/.cache/mpi-operator/kubectl.
images: prereqs
	VERSION=$(VERSION) hack/images.sh _output/images

# The archives built twice (the second time into _output/images-again),
# then read back (test/images): configuration, layers and files of each
# platform's image, docker load's manifest.json, the host's binaries run
# with --version, and the two builds byte for byte.
test-images: images
	VERSION=$(VERSION) hack/images.sh _output/images-again > /dev/null
	VERSION=$(VERSION) MPI_OPERATOR_IMAGES=$(CURDIR)/_output/images \
	  MPI_OPERATOR_IMAGES_AGAIN=$(CURDIR)/_output/images-again \
	  $(GO) test -count=1 -timeout 10m ./test/images/...

# A release (hack/release.sh, docs/releases.md) into RELEASE_DIR: the
# images built and pushed to RELEASE_REGISTRY (RELEASE_PUSH=0 builds them
# only), the install bundles pinned to their digests, the kubectl plugin's
# archives and krew manifest, the SDK's wheel and sdist, checksums.txt.
RELEASE_DIR ?= _output/release
RELEASE_REGISTRY ?= ghcr.io/kubeflow/mpi-operator-elastic
RELEASE_PUSH ?= 1
RELEASE_DOWNLOAD_URL ?= https://github.com/kubeflow/mpi-operator/releases/download/$(VERSION)
release: prereqs
	VERSION=$(VERSION) RELEASE_DIR=$(RELEASE_DIR) RELEASE_REGISTRY=$(RELEASE_REGISTRY) \
	  RELEASE_PUSH=$(RELEASE_PUSH) RELEASE_DOWNLOAD_URL=$(RELEASE_DOWNLOAD_URL) hack/release.sh

# Two releases of this commit (test/release), the first pushed to a
# registry served in-process on loopback, the second a dry build: the
# files byte for byte, the bundles applied on a control plane of its own
# (_output/release-test) with the pushed digests, the krew manifest, the
# wheel installed; about 4 minutes warm on 2 busy cores.
test-release: testbin prereqs
	$(GO) test -count=1 -timeout 30m ./test/release/...

testbin: prereqs
	hack/testbin.sh > /dev/null

# curl, openssl and ss, from Debian's packages, when any is missing.
prereqs:
	hack/install-prereqs.sh

cluster-up:
	hack/cluster-up.sh

cluster-down:
	hack/cluster-down.sh

# The newcomer's path: a local cluster with the operator running as a
# process (hack/local-up.sh), and a scripted elastic job on it.
local-up: build prereqs
	hack/local-up.sh

local-down:
	hack/local-down.sh

demo: local-up
	hack/demo.sh

# The same with the kubeflow.org/v2beta1 operator (v2/) in place of the v1
# one: local-up.sh with OPERATOR=v2, then hack/demo-v2.sh.
demo-v2: build prereqs
	OPERATOR=v2 hack/local-up.sh
	hack/demo-v2.sh

# hack/bench (hack/bench/README.md): the operator against its targets on a
# control plane of its own; bench about 9 minutes on 2 cores, bench-v2
# about 7.
bench: testbin build
	$(GO) run ./hack/bench --scenarios latency,load,memory,bigjob

bench-v2: testbin build
	$(GO) run ./hack/bench --api v2beta1 --scenarios latency,memory

# The Python SDK (sdk/python): installed offline into a virtualenv on
# Debian's python3, its unit tests, then its tests against a control plane
# of its own (_output/sdk) with the v1 operator running, then with the v2
# operator; about 3 minutes on 2 cores once the control plane is built.
test-sdk: testbin build
	sdk/python/run-tests.sh

# The SDK's models are generated from the CRDs by hack/sdkgen, and its API
# reference (docs/sdk-api.md) from its docstrings: stale ones (a CRD or a
# docstring changed, `make generate` not run) fail, as does a copy of the
# job defaults that differs from the plugin's.
verify-sdk:
	/usr/bin/python3 hack/sdkgen/sdkgen.py --check
	/usr/bin/python3 hack/sdkgen/apidoc.py --check
	@cmp -s $(JOB_DEFAULTS) $(SDK_JOB_DEFAULTS) || \
	  { echo "$(SDK_JOB_DEFAULTS) differs from $(JOB_DEFAULTS): run make generate"; exit 1; }

.PHONY: test-sdk verify-sdk

# Every relative link and #anchor of the Markdown documentation (README.md,
# docs/, proposals/, the READMEs of v2, the SDK, examples, hack and test)
# resolves in the repository; http(s) links are checked for form only
# (hack/linkcheck).
verify-links:
	$(GO) run ./hack/linkcheck

.PHONY: verify-links

clean:
	rm -rf _output
