# Helm chart checks, included from the top-level Makefile:
#   include deploy/helm.mk
# `make helm-check` lints the chart with its defaults and with every
# deploy/helm/hubproxy/{ci,examples}/*-values.yaml, renders each into a temporary directory
# and decodes every manifest strictly into the Kubernetes API types
# (deploy/helm/chartcheck). No cluster and no installed helm are needed: helm is
# built from its module the first time (about 2 CPU-minutes, then cached).
# deploy/ is a Go module of its own (k8s.io stays out of the product's go.mod);
# `go -C deploy test ./...` alone runs the same checks, invoking helm itself.

GO ?= go
HELM ?= $(GO) run helm.sh/helm/v3/cmd/helm@v3.22.0
HELM_CHART := deploy/helm/hubproxy
# Release, namespace and Kubernetes version: deploy/helm/chartcheck expects
# these (`helm template` alone would assume v1.20, which has no native sidecars).
HELM_RELEASE := hubproxy
HELM_NAMESPACE := hubproxy
HELM_KUBE_VERSION := 1.32.0

.PHONY: helm-check

helm-check:
	@set -eu; \
	out=$$(mktemp -d); trap 'rm -rf "$$out"' EXIT; \
	kv="--kube-version $(HELM_KUBE_VERSION)"; \
	echo "helm lint/template $(HELM_CHART) (default)"; \
	$(HELM) lint --strict $$kv $(HELM_CHART); \
	$(HELM) template $(HELM_RELEASE) $(HELM_CHART) --namespace $(HELM_NAMESPACE) $$kv >"$$out/default.yaml"; \
	for f in $(HELM_CHART)/ci/*-values.yaml $(HELM_CHART)/examples/*-values.yaml; do \
	  name=$$(basename "$$f" -values.yaml); \
	  case "$$f" in */examples/*) name="example-$$name";; esac; \
	  echo "helm lint/template $(HELM_CHART) ($$name)"; \
	  $(HELM) lint --strict $$kv $(HELM_CHART) --values "$$f"; \
	  $(HELM) template $(HELM_RELEASE) $(HELM_CHART) --namespace $(HELM_NAMESPACE) $$kv --values "$$f" >"$$out/$$name.yaml"; \
	done; \
	$(GO) -C deploy test -count=1 ./helm/chartcheck/ -args -rendered="$$out"
