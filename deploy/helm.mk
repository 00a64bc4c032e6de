# Helm chart checks, included from the top-level Makefile:
#   include deploy/helm.mk
# `make helm-check` lints the chart with its defaults and with every
# deploy/helm/hubproxy/ci/*-values.yaml, renders each into a temporary directory
# and decodes every manifest strictly into the Kubernetes API types
# (deploy/helm/chartcheck). No cluster and no installed helm are needed: helm is
# built from its module the first time (about 2 CPU-minutes, then cached).
# `go test ./...` alone runs the same checks, invoking helm itself.

GO ?= go
HELM ?= $(GO) run helm.sh/helm/v3/cmd/helm@v3.22.0
HELM_CHART := deploy/helm/hubproxy
# Release and namespace: deploy/helm/chartcheck expects these.
HELM_RELEASE := hubproxy
HELM_NAMESPACE := hubproxy

.PHONY: helm-check

helm-check:
	@set -eu; \
	out=$$(mktemp -d); trap 'rm -rf "$$out"' EXIT; \
	echo "helm lint/template $(HELM_CHART) (default)"; \
	$(HELM) lint --strict $(HELM_CHART); \
	$(HELM) template $(HELM_RELEASE) $(HELM_CHART) --namespace $(HELM_NAMESPACE) >"$$out/default.yaml"; \
	for f in $(HELM_CHART)/ci/*-values.yaml; do \
	  name=$$(basename "$$f" -values.yaml); \
	  echo "helm lint/template $(HELM_CHART) ($$name)"; \
	  $(HELM) lint --strict $(HELM_CHART) --values "$$f"; \
	  $(HELM) template $(HELM_RELEASE) $(HELM_CHART) --namespace $(HELM_NAMESPACE) --values "$$f" >"$$out/$$name.yaml"; \
	done; \
	$(GO) test -count=1 ./deploy/helm/chartcheck/ -args -rendered="$$out"
