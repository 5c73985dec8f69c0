# inferd — `make run` starts the server on the example repository, `make test` runs the suite.
SHELL := /bin/bash
GO ?= go
# 1.29.0's telemetry crashes CreateOrtEnv in shell-less images without
# /etc/machine-id (microsoft/onnxruntime#32173); 1.30.0 has the fix (#32226)
# but ORT_GPU_PKG has no 1.30 build yet, so the binary sets
# ORT_DISABLE_TELEMETRY=1 itself (core/onnxrt) and deploy's TestImage checks it.
ORT_VERSION := 1.29.0
ORT_DIR := third_party/onnxruntime
ORT_LIB := $(ORT_DIR)/libonnxruntime.so.1
# sha256 of bin/napi-v6/linux/x64/libonnxruntime.so.1 in onnxruntime-node@1.29.0
ORT_SHA256 := 89688f5cf51c7e31befbb7b9101bc027799009b18d1baa9a5b1146a72e69538d
ORT_GPU_PKG := com.github.asus4.onnxruntime.linux-x64-gpu@0.4.9
export ORT_LIB_PATH ?= $(CURDIR)/$(ORT_LIB)

BIN := bin/inferd
HTTP_PORT ?= 8000
METRICS_PORT ?= 8002
# An execution count, not a duration: with a duration, Go 1.26's fuzz
# coordinator can fail a target with "context deadline exceeded" when the
# time runs out mid-execution (go.dev/issue/75804, fixed in Go 1.27).
FUZZTIME ?= 4000x

.PHONY: all build build-sagemaker build-vertex build-lambda images run test vet lint fuzz bench ort ort-gpu azurite openai-node redis generate clean gpu-bundle
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

all: build

ort: $(ORT_LIB)

# Fetched once with npm pack (the one channel that reaches the registry here),
# checked against the pinned sha256, never committed.
$(ORT_LIB):
	@mkdir -p $(ORT_DIR)/.dl
	cd $(ORT_DIR)/.dl && npm pack --silent onnxruntime-node@$(ORT_VERSION) >/dev/null
	tar -xzf $(ORT_DIR)/.dl/onnxruntime-node-$(ORT_VERSION).tgz -C $(ORT_DIR)/.dl package/bin/napi-v6/linux/x64/libonnxruntime.so.1
	echo "$(ORT_SHA256)  $(ORT_DIR)/.dl/package/bin/napi-v6/linux/x64/libonnxruntime.so.1" | sha256sum -c --quiet
	mv $(ORT_DIR)/.dl/package/bin/napi-v6/linux/x64/libonnxruntime.so.1 $(ORT_LIB)
	rm -rf $(ORT_DIR)/.dl

# Azurite, the Azure Storage emulator the as:// tests start (repo/as,
# cmd/inferd), fetched with npm like ONNX Runtime, never committed. 3.35.0 is
# the last release that runs on Debian 12's Node.js 18.
AZURITE_VERSION := 3.35.0
AZURITE := third_party/azurite/node_modules/.bin/azurite-blob
azurite: $(AZURITE)

$(AZURITE):
	@mkdir -p third_party/azurite
	npm install --silent --no-audit --no-fund --prefix third_party/azurite azurite@$(AZURITE_VERSION)

# OpenAI's official Node client (the npm package openai), which the OpenAI
# route tests in cmd/inferd drive against a real listener, fetched with npm
# like Azurite, never committed. 6.x is the last major that runs on Node.js
# 20 (7.x declares node >= 22).
OPENAI_NODE_VERSION := 6.49.0
OPENAI_NODE := third_party/openai-node/node_modules/openai/package.json
openai-node: $(OPENAI_NODE)

$(OPENAI_NODE):
	@mkdir -p third_party/openai-node
	npm install --silent --no-audit --no-fund --save-exact --prefix third_party/openai-node openai@$(OPENAI_NODE_VERSION)

# CUDA 13 execution providers matching ORT 1.29.0, placed beside the core library.
ort-gpu: $(ORT_LIB)
	@mkdir -p $(ORT_DIR)/.dlgpu
	cd $(ORT_DIR)/.dlgpu && npm pack --silent $(ORT_GPU_PKG) >/dev/null && tar -xzf *.tgz
	find $(ORT_DIR)/.dlgpu -name 'libonnxruntime_providers_*.so' -exec cp {} $(ORT_DIR)/ \;
	rm -rf $(ORT_DIR)/.dlgpu
	ls $(ORT_DIR)

build: $(ORT_LIB)
	$(GO) build -o $(BIN) ./cmd/inferd

CLOUD_TAGS := inferd_sagemaker inferd_vertex inferd_lambda
# The per-cloud builds (docs/deploy.md): the same source with a build tag
# that leaves out the repository drivers and frontends the cloud does not
# use; written beside bin/inferd.
build-sagemaker: $(ORT_LIB)
	$(GO) build -tags inferd_sagemaker -o $(BIN)-sagemaker ./cmd/inferd
build-vertex: $(ORT_LIB)
	$(GO) build -tags inferd_vertex -o $(BIN)-vertex ./cmd/inferd
# lambda.norpc: the Lambda image's tags too (deploy/docker/Dockerfile.lambda):
# provided.al2023 speaks the Runtime API, so aws-lambda-go's net/rpc mode
# (and encoding/gob's init) is dead weight.
build-lambda: $(ORT_LIB)
	$(GO) build -tags lambda.norpc,inferd_lambda -o $(BIN)-lambda ./cmd/inferd

# Every image (deploy/docker): the full CPU image, the SageMaker and Vertex
# AI images (the same Dockerfile with their build's tag), the Lambda image
# and the GPU image. IMAGE is the repository the tags go to.
IMAGE ?= inferd
DOCKER ?= docker
images:
	$(DOCKER) build -f deploy/docker/Dockerfile -t $(IMAGE):cpu .
	$(DOCKER) build -f deploy/docker/Dockerfile --target cloud-sagemaker --build-arg BUILD_TAGS=inferd_sagemaker -t $(IMAGE):sagemaker .
	$(DOCKER) build -f deploy/docker/Dockerfile --target cloud --build-arg BUILD_TAGS=inferd_vertex -t $(IMAGE):vertex .
	$(DOCKER) build -f deploy/docker/Dockerfile.lambda -t $(IMAGE):lambda .
	$(DOCKER) build -f deploy/docker/Dockerfile.gpu -t $(IMAGE):gpu .

# examples/python_repository's model.py files need a python3 with numpy: the
# first of $(PYTHON), python3 on PATH and /usr/bin/python3 that has it runs
# them; without one, examples/model_repository is served alone.
PYTHON ?= python3
GRPC_PORT ?= 8001
run: build
	@py=$$(for p in $(PYTHON) python3 /usr/bin/python3; do \
	  if $$p -c 'import numpy' 2>/dev/null; then command -v $$p; break; fi; done); \
	if [ -n "$$py" ]; then \
	  more="--model-repository=examples/python_repository --backend-config=python,python-executable=$$py"; \
	else \
	  echo "make run: no python3 with numpy (apt-get install python3-numpy), so examples/python_repository is not served" >&2; \
	fi; \
	set -x; exec ./$(BIN) --model-repository=examples/model_repository $$more \
	  --http-port=$(HTTP_PORT) --grpc-port=$(GRPC_PORT) --metrics-port=$(METRICS_PORT)

vet:
	$(GO) vet ./...

# gofmt and staticcheck must both be silent, on the per-cloud builds too (their
# files in cmd/inferd compile only with their tag).
lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi
	$(GO) run $(STATICCHECK) ./...
	@set -e; for t in $(CLOUD_TAGS); do echo "vet, staticcheck -tags $$t ./cmd/inferd"; \
	  $(GO) vet -tags $$t ./cmd/inferd; $(GO) run $(STATICCHECK) -tags $$t ./cmd/inferd; done

# The Redis response cache tests start a real redis-server (Debian's package
# redis-server); as root on Debian it is installed, elsewhere they skip with
# the reason (INFERD_REQUIRE_REDIS=1, as in .ci/run, makes that a failure).
redis:
	@command -v redis-server >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then apt-get install -y -qq redis-server; \
	  else echo "make test: no redis-server (apt-get install redis-server), so the Redis cache tests skip" >&2; fi; }

test: $(ORT_LIB) $(AZURITE) $(OPENAI_NODE) redis lint
	$(GO) test -race -count=1 ./...
	$(MAKE) --no-print-directory fuzz

# A short pass of every fuzz target over its seed corpus and a few seconds of new inputs.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for t in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/^func //'); do \
	    echo "fuzz $$pkg $$t"; \
	    $(GO) test $$pkg -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME); \
	  done; \
	done

# Benchmarks (BENCHMARKS.md). BENCH is the -bench pattern, BENCHTIME the
# -benchtime, BENCHCOUNT the -count, BENCHPKGS the packages: e.g. figures 1
# and 2 alone, three times over, with
#   make bench BENCH=BenchmarkBatching BENCHTIME=3s BENCHCOUNT=3 BENCHPKGS=./platforms/httpapi
BENCH ?= .
BENCHTIME ?= 1s
BENCHCOUNT ?= 1
BENCHPKGS ?= ./...
bench: $(ORT_LIB)
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchtime $(BENCHTIME) -count $(BENCHCOUNT) -benchmem $(BENCHPKGS)

# The GPU check bundle, for a GPU host without Go or network (README, "On a
# GPU host"): the inferd binary, the test binaries of the packages with GPU
# tests and benchmarks, ONNX Runtime with its CUDA and TensorRT providers
# (`make ort-gpu`; GPU_PROVIDERS=0 leaves them out, as CI does) and the models
# deploy/gpu/checkrepo writes, as one xz-compressed tar split into parts of at
# most PART_MB MiB, GPU_BUNDLE/gpu-<id>.NNofMM, which deploy/gpu/check.sh
# reassembles and runs.
GPU_BUNDLE ?= .gpu-bundle
GPU_PROVIDERS ?= 1
PART_MB ?= 55
# xz -3: parts about 8% larger than -6 for a sixth of the time on the CUDA provider.
BUNDLE_XZ ?= -3
BUNDLE_GOFLAGS ?= -trimpath -ldflags='-s -w'
# deploy/gpu's test binary is the end-to-end checks' client; CI leaves
# platforms/httpapi (the figure 1 benchmarks) out.
GPU_TEST_PKGS ?= core/onnxrt platforms/metrics platforms/shm/cudaipc platforms/httpapi deploy/gpu
gpu-bundle: $(ORT_LIB)
	@set -euo pipefail; st=$(GPU_BUNDLE)/stage; rm -rf $(GPU_BUNDLE); mkdir -p $$st/lib $$st/tests; \
	if [ "$(GPU_PROVIDERS)" != 0 ]; then \
	  [ -e $(ORT_DIR)/libonnxruntime_providers_cuda.so ] || $(MAKE) --no-print-directory ort-gpu; \
	  cp $(ORT_DIR)/libonnxruntime_providers_*.so $$st/lib/; \
	fi; \
	cp -L $(ORT_LIB) $$st/lib/; \
	$(GO) build $(BUNDLE_GOFLAGS) -o $$st/inferd ./cmd/inferd; \
	for p in $(GPU_TEST_PKGS); do $(GO) test -c $(BUNDLE_GOFLAGS) -o $$st/tests/$$(basename $$p).test ./$$p; done; \
	$(GO) run $(BUNDLE_GOFLAGS) ./deploy/gpu/checkrepo $$st/models; \
	cp deploy/gpu/cudashm_check.py deploy/gpu/cudashm_bench.py $$st/; \
	providers=$$(ls $$st/lib | sed -n 's/^libonnxruntime_providers_\(.*\)\.so$$/\1/p' | { grep -vx shared || true; } | paste -sd, -); \
	printf 'commit=%s\ngo=%s\nproviders=%s\n' "$$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$$(git diff --quiet HEAD -- . 2>/dev/null || echo +changes)" \
	  "$$($(GO) env GOVERSION)" "$${providers:-none}" >$$st/BUNDLE; \
	tar -C $$st -cf - . | xz -T0 $(BUNDLE_XZ) >$(GPU_BUNDLE)/bundle.tar.xz; \
	rm -rf $$st; \
	id=$$(sha256sum $(GPU_BUNDLE)/bundle.tar.xz | cut -c1-8); \
	split -b $(PART_MB)m -d -a 2 --numeric-suffixes=1 $(GPU_BUNDLE)/bundle.tar.xz $(GPU_BUNDLE)/gpu-$$id.; \
	rm $(GPU_BUNDLE)/bundle.tar.xz; \
	n=$$(ls $(GPU_BUNDLE) | wc -l); \
	for f in $(GPU_BUNDLE)/gpu-$$id.*; do mv $$f $$f"of"$$(printf %02d $$n); done; \
	ls -l $(GPU_BUNDLE)

generate:
	$(GO) generate ./...

clean:
	rm -rf bin
