# Baton's build. Run `make help` for the targets.

IMG ?= baton-controller:latest
CONTROLLER_GEN_VERSION ?= v0.23.0
LOCALBIN ?= $(shell pwd)/bin
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen
GO ?= go
SHELL := /bin/bash
# Ginkgo suites report every spec; CI logs get no colour codes.
GINKGO_FLAGS ?= -ginkgo.v $(if $(CI),-ginkgo.no-color,)
# Where the local control plane used by the quickstart keeps its state.
LOCAL_DIR ?= $(shell pwd)/bin/local

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate the CRDs and RBAC under config/, the PrometheusRule from config/prometheus/rules.yaml, and the Helm chart's copies of them.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd:allowDangerousTypes=true webhook paths="{./api/...,./controllers/...,./internal/...}" output:crd:artifacts:config=config/crd/bases
	$(GO) run ./hack/promrule config/prometheus/rules.yaml config/prometheus/prometheusrule.yaml
	hack/chart-sync.sh

.PHONY: generate
generate: controller-gen ## Generate the deepcopy code.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: fmt
fmt: ## Run go fmt.
	$(GO) fmt ./...

.PHONY: vet
vet: ## Run go vet.
	$(GO) vet ./...

.PHONY: lint
lint: ## Check formatting, run golangci-lint (go vet, kube-api-linter, depguard and the rest of .golangci.yml), and keep the workflow core free of clients, SDKs and databases.
	@out=$$(gofmt -l agents api cmd controllers hack internal test); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(BACKGROUND) "$$(hack/tool.sh golangci-lint)" run ./...
	@# Every package's unit tests run, with the race detector or without (RACE_PKGS, PURE_PKGS).
	@out=$$(comm -23 <($(GO) list ./agents/... ./api/... ./cmd/... ./controllers/... ./internal/... | sort) <($(GO) list $(RACE_PKGS) $(PURE_PKGS) | sort)); \
		if [ -n "$$out" ]; then echo "packages in neither RACE_PKGS nor PURE_PKGS (Makefile):"; echo "$$out"; exit 1; fi
	@# The pure core imports no client, SDK or database.
	@out=$$($(GO) list -deps ./internal/workflow | grep -E 'openai-go|modelcontextprotocol|controller-runtime/pkg/(client|cache|manager)|k8s.io/client-go|jackc/pgx|modernc.org/sqlite|go.opentelemetry.io|prometheus/client_golang'); \
		if [ -n "$$out" ]; then echo "internal/workflow must stay pure; it depends on:"; echo "$$out"; exit 1; fi

.PHONY: verify
verify: manifests generate ## Fail if generated files or go.mod are stale.
	$(GO) mod tidy
	@if [ -n "$$(git status --porcelain -- api config charts go.mod go.sum)" ]; then \
		echo "Generated files are stale; run 'make manifests generate' and 'go mod tidy', then commit:"; \
		git status --porcelain -- api config charts go.mod go.sum; git diff -- api config charts go.mod go.sum | head -50; exit 1; fi

##@ Tests

.PHONY: test
# The suites that start real servers spend much of their time waiting on them: make test runs
# every suite at once (about 10 minutes on 2 cores, against 17 one after another), each suite's
# output printed whole when it ends. The e2e and integration suites take longest and wait the
# most: lint, unit and the image's run at a lower priority (BACKGROUND), so that they take the
# CPU those two leave while they wait, rather than make them wait for it. The chart's suite
# starts an API server, whose start has a deadline: it keeps the normal priority.
test: ## Run lint and every suite side by side: unit (with the fuzz seed corpora), integration (envtest), e2e, the Helm chart's and the image build's. make verify (CI runs it first) checks the generated files.
	@$(MAKE) --no-print-directory -j6 --output-sync=target BACKGROUND="nice -n 10" lint test-unit test-integration test-e2e test-helm test-image

# go test runs vet on every package it tests, once per build mode; make lint runs govet (the
# same analyzers and more) once over everything, so the suites leave it out.
TEST_FLAGS := -count=1 -vet=off

# Property tests: cases per property.
RAPID_CHECKS ?= 500
# Fuzzing time per target.
FUZZTIME ?= 20s

# One build mode for the binaries and every suite that runs without the race detector: the
# image's (static, paths trimmed). The e2e suite runs the manager as the image builds it, and
# the image check finds every package compiled already. The race detector needs cgo: the
# packages it runs on are built once more, in its mode.
STATIC := CGO_ENABLED=0 GOFLAGS=-trimpath
# Unit tests under the race detector: the packages that start goroutines or share state between
# them. The rest decide from values (the core, the record format, the replays, money, quotas),
# or are called one at a time and keep nothing between calls (the config, endpoint and session
# reconcilers, the Secret reader, the guardrails' client), and run in the static mode.
# `make lint` checks that every package is in one list or the other.
RACE_PKGS := ./agents/... ./controllers/agentrun/... ./controllers/agentquota/... ./cmd/... ./internal/a2aserver/... ./internal/console/... \
	./internal/endpoints/... ./internal/ledger/... ./internal/metrics/... ./internal/notifier/... ./internal/operator/... \
	./internal/pacing/... ./internal/replay/live/... ./internal/replay/worker/... ./internal/steps/... \
	./internal/toolbox/... ./internal/tools/... ./internal/transcript/... ./internal/transcriptapi/... \
	./internal/transcriptclient/... \
	./internal/webhook/...
PURE_PKGS := ./api/... ./controllers/agentconfig/... ./controllers/agentsession/... ./controllers/modelendpoint/... \
	./internal/guardrails/... ./internal/secrets/... ./internal/cost/... ./internal/decisions/... ./internal/egress/... ./internal/notify ./internal/outbox \
	./internal/sessions/... \
	./internal/kueue/... ./internal/quota/... ./internal/records/... ./internal/replay \
	./internal/replay/stored/... ./internal/runview/... ./internal/telemetry/... ./internal/textbound/... ./internal/workflow/...

.PHONY: test-unit
test-unit: ## Unit and property tests, the A2A samples on the A2A JavaScript SDK, the transcript stores' conformance suite (SQLite, and a real PostgreSQL), promtool on config/prometheus, and the docs' condition types against the API's.
	$(STATIC) PG_BIN="$$(hack/postgres.sh)" PROMTOOL="$$(hack/tool.sh promtool)" RAPID_CHECKS=$(RAPID_CHECKS) $(BACKGROUND) $(GO) test $(TEST_FLAGS) $(PURE_PKGS) ./test/toolservers/... ./test/nodeservers/... ./test/a2ajs/... ./test/prometheus/... ./test/docs/...
	PG_BIN="$$(hack/postgres.sh)" $(BACKGROUND) $(GO) test -race $(TEST_FLAGS) $(RACE_PKGS)

.PHONY: fuzz
fuzz: ## Fuzz the decision core, the providers' answers and replays of transcript files for FUZZTIME each (the seed corpora also run in test-unit).
	$(GO) test ./internal/workflow -run '^$$' -fuzz '^FuzzApply$$' -fuzztime $(FUZZTIME)
	$(GO) test ./agents -run '^$$' -fuzz '^FuzzProviderAnswers$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/replay -run '^$$' -fuzz '^FuzzReplayExport$$' -fuzztime $(FUZZTIME)

.PHONY: envtest-assets
envtest-assets: ## Make kube-apiserver and etcd available (download, else build from the module proxy).
	@hack/envtest-assets.sh

.PHONY: test-integration
test-integration: ## The envtest suites: the operator against a real API server and etcd, its transcript in a real PostgreSQL; runs' Workloads against a real Kueue.
	$(STATIC) KUBEBUILDER_ASSETS="$$(hack/envtest-assets.sh)" PG_BIN="$$(hack/postgres.sh)" KUEUE_BIN="$$(hack/kueue.sh)" $(GO) test -v $(TEST_FLAGS) -timeout 20m ./test/integration/... ./test/kueuetest/... $(GINKGO_FLAGS)

.PHONY: test-e2e
test-e2e: build ## The e2e suite: the operator binary, the real kubectl and a headless Chromium against a local control plane.
	$(STATIC) KUBEBUILDER_ASSETS="$$(hack/envtest-assets.sh)" OTELCOL_BIN="$$(hack/tool.sh otelcol)" CHROMIUM_BIN="$$(hack/chromium.sh)" MANAGER_BIN=$(LOCALBIN)/manager PLUGIN_BIN=$(LOCALBIN)/kubectl-baton $(GO) test -v $(TEST_FLAGS) -timeout 20m ./test/e2e/... $(GINKGO_FLAGS)

.PHONY: test-helm
test-helm: build ## The Helm chart: helm lint, equivalence with config/default, a server-side dry run against a real API server.
	$(STATIC) MANAGER_BIN=$(LOCALBIN)/manager HELM="$$(hack/tool.sh helm)" KUBEBUILDER_ASSETS="$$(hack/envtest-assets.sh)" $(GO) test -v $(TEST_FLAGS) ./test/helm/...

.PHONY: test-image
test-image: build ## The container image without a container engine: build the manager from exactly the files the Dockerfile copies (after .dockerignore), with its build command. After make build, which compiles the same packages in the same mode: its build finds them in the cache rather than compile them beside it.
	$(STATIC) $(BACKGROUND) $(GO) test -v $(TEST_FLAGS) ./test/image/...

.PHONY: bench
bench: build ## Benchmarks: Baton beside a minimal baseline controller on one API server (ratios; BENCH_REPS, BENCH_SCALE, BENCH_ONLY), what a status write costs the API server by its shape, the operator binary killed and started again while it holds 10,000 live runs, the transcript stores' write latency, replays of recorded runs (the operator's memory while it replays a BENCH_REPLAY_BYTES transcript, 1Gi by default), a session turn's history assembly, notifications of 1,000 gates opened at once, what a guardrail adds to a call, and the share a namespace keeps beside one of huge asks.
	BENCH_REPS="$(BENCH_REPS)" BENCH_SCALE="$(BENCH_SCALE)" BENCH_ONLY="$(BENCH_ONLY)" BENCH_QUOTA="$(BENCH_QUOTA)" BENCH_GUARDRAIL="$(BENCH_GUARDRAIL)" BENCH_UNTRUSTED="$(BENCH_UNTRUSTED)" KUBEBUILDER_ASSETS="$$(hack/envtest-assets.sh)" MANAGER_BIN=$(LOCALBIN)/manager \
		$(GO) test ./test/benchmark -run '^$$' -bench . -benchtime 1x -timeout 60m
	PG_BIN="$$(hack/postgres.sh)" $(GO) test ./internal/transcript/sqlstore -run '^$$' -bench AppendStep -benchtime 4000x
	$(GO) test ./internal/replay -run '^$$' -bench Replay -benchtime 20x
	$(GO) test ./internal/sessions -run '^$$' -bench History -benchtime 2000x
	$(GO) test ./internal/notifier -run '^$$' -bench GatesOpenAtOnce -benchtime 3x
	$(GO) test ./internal/guardrails -run '^$$' -bench GuardedCall -benchtime 2000x
	$(GO) test ./internal/pacing -run '^$$' -bench ShareUnderHugeAsks -benchtime 1x
	BENCH_REPLAY_BYTES="$(BENCH_REPLAY_BYTES)" $(GO) test ./internal/replay/stored -run '^$$' -bench ReplayOfALargeRun -benchtime 1x -timeout 30m

##@ Run

.PHONY: quickstart
quickstart: build ## Start a local control plane and the operator, run the helpdesk sample, leave it running.
	LOCAL_DIR=$(LOCAL_DIR) MANAGER_BIN=$(LOCALBIN)/manager hack/quickstart.sh up

.PHONY: quickstart-down
quickstart-down: ## Stop what quickstart started.
	LOCAL_DIR=$(LOCAL_DIR) hack/quickstart.sh down

.PHONY: run
run: manifests generate ## Run the manager against the current kubeconfig (transcript in bin/local/).
	ENABLE_WEBHOOKS=$${ENABLE_WEBHOOKS:-false} $(GO) run ./cmd/manager --transcript-store=$(LOCAL_DIR)/transcript.db $(ARGS)

##@ Build

.PHONY: build
build: ## Build the manager and the kubectl plugin (kubectl-baton) into bin/, static, as the image builds the manager.
	$(STATIC) $(GO) build -o $(LOCALBIN)/manager ./cmd/manager
	$(STATIC) $(GO) build -o $(LOCALBIN)/kubectl-baton ./cmd/kubectl-baton

.PHONY: install-plugin
install-plugin: ## Install the kubectl plugin (kubectl baton) into $GOBIN, on the PATH.
	$(GO) install ./cmd/kubectl-baton

.PHONY: docker-build
docker-build: ## Build the manager image.
	docker build -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the manager image.
	docker push $(IMG)

##@ Deployment

.PHONY: install
install: manifests ## Install the CRDs into the current cluster.
	kubectl kustomize config/crd | kubectl apply --server-side -f -

.PHONY: uninstall
uninstall: manifests ## Remove the CRDs from the current cluster.
	kubectl kustomize config/crd | kubectl delete --ignore-not-found -f -

.PHONY: deploy
deploy: manifests ## Deploy the operator with image $(IMG) to the current cluster.
	mkdir -p $(LOCALBIN)/deploy && cp -r config $(LOCALBIN)/deploy/
	cd $(LOCALBIN)/deploy/config/manager && kubectl kustomize edit set image controller=$(IMG) 2>/dev/null || \
		sed -i 's#image: controller:latest#image: $(IMG)#' $(LOCALBIN)/deploy/config/manager/manager.yaml
	kubectl kustomize $(LOCALBIN)/deploy/config/default | kubectl apply --server-side -f -

.PHONY: undeploy
undeploy: ## Remove the operator from the current cluster.
	kubectl kustomize config/default | kubectl delete --ignore-not-found -f -

##@ Tools

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN) ## Install controller-gen into bin/.
$(CONTROLLER_GEN): $(LOCALBIN)
	test -s $(CONTROLLER_GEN) && $(CONTROLLER_GEN) --version | grep -q $(CONTROLLER_GEN_VERSION) || \
		GOBIN=$(LOCALBIN) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)

$(LOCALBIN):
	mkdir -p $(LOCALBIN)
