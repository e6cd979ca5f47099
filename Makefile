# kubefair — build, test and demo. `make help` lists the targets.

# Pins. Envtest, the local cluster and the chart's tests share one cache of
# Kubernetes binaries and helm (hack/build-k8s.sh).
K8S_VERSION            ?= v1.37.2
ETCD_VERSION           ?= v3.6.16
CONTROLLER_GEN_VERSION ?= v0.23.0
HELM_VERSION           ?= v3.22.1
# The nodes' container runtime (hack/build-runtime.sh).
CONTAINERD_VERSION     ?= v2.4.2
RUNC_VERSION           ?= v1.5.2
CNI_VERSION            ?= v1.10.0

# Caches live outside the repository and are reused when present.
KUBEFAIR_CACHE ?= $(if $(XDG_CACHE_HOME),$(XDG_CACHE_HOME),$(HOME)/.cache)/kubefair
export KUBEFAIR_CACHE
TOOLS_BIN      := $(KUBEFAIR_CACHE)/tools/bin
K8S_BIN        := $(KUBEFAIR_CACHE)/k8s-$(K8S_VERSION)/bin
CONTROLLER_GEN := $(TOOLS_BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
HELM           := $(K8S_BIN)/helm-$(HELM_VERSION)

K8S_ENV        := K8S_VERSION=$(K8S_VERSION) ETCD_VERSION=$(ETCD_VERSION) HELM_VERSION=$(HELM_VERSION)
RUNTIME_ENV    := CONTAINERD_VERSION=$(CONTAINERD_VERSION) RUNC_VERSION=$(RUNC_VERSION) CNI_VERSION=$(CNI_VERSION)

# envtest finds etcd and kube-apiserver here.
export KUBEBUILDER_ASSETS := $(K8S_BIN)
# The suites and the local cluster find containerd, runc and the CNI
# plugins here (bin/, cni/).
export KUBEFAIR_RUNTIME := $(shell KUBEFAIR_CACHE=$(KUBEFAIR_CACHE) $(RUNTIME_ENV) hack/build-runtime.sh --dir)

# Everything kubefair builds is static (the images, the agent the suites
# run, the guests' test binaries), and nothing needs cgo: with one setting
# for all, the tests, vet and those builds compile each dependency once
# into the Go build cache (a second variant costs about 2 minutes cold).
export CGO_ENABLED := 0

GO_TEST_FLAGS ?=
DEMO_FLAGS    ?=

# Components append the targets their suites need before `go test` runs
# (kernel images, cluster binaries, container images), in their own section
# below and above "Test and demo".
TEST_PREREQS :=

.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code for the API types.
	$(CONTROLLER_GEN) object paths="./api/..."

.PHONY: manifests
manifests: $(CONTROLLER_GEN) $(HELM) ## Generate CRDs and RBAC from markers (config/), the chart's copies of them, and the agent's seccomp profile.
	$(CONTROLLER_GEN) crd:allowDangerousTypes=true paths="./api/..." output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=kubefair-controller paths="./controllers/..." output:rbac:artifacts:config=config/rbac
	HELM=$(HELM) hack/sync-chart.sh
	@# Written whole then renamed: the node image, built beside verify, hashes it.
	go run ./node-agent/cmd/kubefair-agent --print-seccomp-profile > config/seccomp/kubefair-agent.json.tmp
	mv config/seccomp/kubefair-agent.json.tmp config/seccomp/kubefair-agent.json

.PHONY: verify
verify: $(CONTROLLER_GEN) $(HELM) ## Regenerate everything and fail if the tree changed.
	@# One after the other, also beside other jobs (make test): lint reads what generate writes.
	@# (The tools are this make's prerequisites, so that a parallel make builds each once.)
	@$(MAKE) --no-print-directory -j1 generate manifests lint
	@git status --porcelain -- api config charts | grep . && { echo "generated files are stale: run 'make generate manifests' and commit"; git diff --stat -- api config charts; exit 1; } || echo "verify: generated files are up to date"

.PHONY: lint
lint: ## gofmt and go vet.
	@out=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$out" ] || { echo "gofmt needed:"; echo "$$out"; exit 1; }
	go vet ./...
	go vet -tags kubefair_guest ./node-agent/enforce/threads # the tests test/kernel builds for the guests

.PHONY: build
build: ## Build the controller and agent binaries into bin/.
	go build -o bin/ ./controllers/cmd/kubefair-controller ./node-agent/cmd/...

##@ Tools

.PHONY: deps
deps: ## Install the Debian packages the tests and the demo need (only missing ones).
	hack/deps.sh

.PHONY: tools
tools: deps $(CONTROLLER_GEN) envtest ## Install packages, controller-gen and the envtest binaries (cached).

.PHONY: envtest
envtest: ## Build etcd and kube-apiserver from the Go module proxy into the cache.
	$(K8S_ENV) hack/build-k8s.sh etcd kube-apiserver

$(CONTROLLER_GEN):
	mkdir -p $(TOOLS_BIN)
	GOBIN=$(TOOLS_BIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(TOOLS_BIN)/controller-gen $@

##@ Components
# (each component's targets go here, one block each)

.PHONY: helm
helm: $(HELM) ## Build helm from the Go module proxy beside the Kubernetes binaries (hack/build-k8s.sh; cached).
$(HELM):
	$(K8S_ENV) hack/build-k8s.sh helm >/dev/null
export HELM
TEST_PREREQS += helm

.PHONY: kernel
kernel: ## Build the patched Linux 6.12 (kernel/series) and the same kernel unpatched, for the QEMU suites (cached).
	kernel/build.sh
TEST_PREREQS += kernel

.PHONY: runtime
runtime: deps ## Build containerd, runc (static, with libseccomp) and the CNI plugins from the Go module proxy, for the host node and the containerd suites (cached).
	$(RUNTIME_ENV) hack/build-runtime.sh
TEST_PREREQS += runtime

.PHONY: cluster-binaries
cluster-binaries: ## Build every Kubernetes binary of the local cluster (cached).
	$(K8S_ENV) hack/build-k8s.sh etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl
TEST_PREREQS += cluster-binaries

.PHONY: node-image
node-image: cluster-binaries runtime ## Build the cgroup v2 guest node's disk image (Debian, systemd, containerd 2, kubelet; root, cached; the kernel is booted beside it, not in it).
	K8S_VERSION=$(K8S_VERSION) $(RUNTIME_ENV) hack/build-node-image.sh >/dev/null
TEST_PREREQS += node-image

.PHONY: cluster-up
cluster-up: deps cluster-binaries runtime helm ## Start the local single-node cluster (root), kubefair's images imported.
	go run ./hack/cluster up

.PHONY: cluster-up-guest
cluster-up-guest: deps cluster-binaries helm kernel node-image ## The local cluster and a cgroup v2 node in a QEMU guest (root).
	go run ./hack/cluster -guest up

.PHONY: cluster-down
cluster-down: ## Stop the local cluster and leave the machine as it was.
	go run ./hack/cluster down

##@ Test and demo

# verify and the prerequisites build two at a time, the kernels (the
# longest chain) first: from empty caches each has long stretches on one
# CPU or none (unpacking and committing the kernel tree, linking the
# Kubernetes binaries, downloading modules and Debian packages) that the
# other fills. cluster-binaries includes envtest's etcd and kube-apiserver,
# so that one build makes all the Kubernetes binaries. The timeout is per
# package: the e2e package takes 30–39 minutes, and on a slower day took over
# 45 (it tears its cluster down before the timeout, test/e2e TestMain).
.PHONY: test
test: deps $(CONTROLLER_GEN) ## Run every test suite (needs root for the node suites).
	$(MAKE) -j2 kernel verify cluster-binaries $(TEST_PREREQS)
	hack/go-test.sh $(GO_TEST_FLAGS) -count=1 -timeout 60m -p 1 ./...

# The demo's second node, a QEMU guest on kubefair's kernel, needs its disk
# image (and the kernel); -embedded and -guest=false need neither.
DEMO_NODES := $(if $(filter -embedded -guest=false,$(DEMO_FLAGS)),cluster-binaries runtime,kernel node-image)

.PHONY: demo
demo: tools $(DEMO_NODES) helm ## kubefair on a real local cluster of two nodes (this host; a QEMU guest on kubefair's kernel): helm install, tenants, stock vs kubefair, `kubectl get tenants`, the thread table (DEMO_FLAGS=-guest=false: the host alone; -embedded: without containers).
	go run ./hack/demo $(DEMO_FLAGS)
