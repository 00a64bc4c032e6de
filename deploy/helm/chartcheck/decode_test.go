package chartcheck

import (
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// ServiceMonitor mirrors the part of monitoring.coreos.com/v1 ServiceMonitor the
// chart renders. Any field the chart writes that is not here fails strict
// decoding, so add fields here only after checking the CRD's schema.
type ServiceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              ServiceMonitorSpec `json:"spec"`
}

// ServiceMonitorSpec is the used subset of the CRD's spec.
type ServiceMonitorSpec struct {
	JobLabel          string               `json:"jobLabel,omitempty"`
	Selector          metav1.LabelSelector `json:"selector"`
	NamespaceSelector NamespaceSelector    `json:"namespaceSelector,omitempty"`
	Endpoints         []Endpoint           `json:"endpoints"`
}

// NamespaceSelector is the CRD's namespace selector.
type NamespaceSelector struct {
	Any        bool     `json:"any,omitempty"`
	MatchNames []string `json:"matchNames,omitempty"`
}

// Endpoint is one scrape endpoint of a ServiceMonitor.
type Endpoint struct {
	Port          string `json:"port,omitempty"`
	Path          string `json:"path,omitempty"`
	Scheme        string `json:"scheme,omitempty"`
	Interval      string `json:"interval,omitempty"`
	ScrapeTimeout string `json:"scrapeTimeout,omitempty"`
}

// PodMonitor mirrors the part of monitoring.coreos.com/v1 PodMonitor the chart
// renders; like ServiceMonitor, extend it only after checking the CRD.
type PodMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              PodMonitorSpec `json:"spec"`
}

// PodMonitorSpec is the used subset of the CRD's spec.
type PodMonitorSpec struct {
	Selector            metav1.LabelSelector `json:"selector"`
	NamespaceSelector   NamespaceSelector    `json:"namespaceSelector,omitempty"`
	PodMetricsEndpoints []Endpoint           `json:"podMetricsEndpoints"`
}

// PrometheusRule mirrors monitoring.coreos.com/v1 PrometheusRule.
type PrometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Groups []RuleGroup `json:"groups"`
	} `json:"spec"`
}

// RuleGroup is one group of a PrometheusRule.
type RuleGroup struct {
	Name     string `json:"name"`
	Interval string `json:"interval,omitempty"`
	Rules    []Rule `json:"rules"`
}

// Rule is one alerting or recording rule.
type Rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// kindInfo is how one kind is decoded: the only apiVersion accepted for it and
// a constructor for its typed object.
type kindInfo struct {
	apiVersion string
	newObject  func() any
}

// kindOf says how to decode each kind the chart may render. A kind not listed
// fails the test, so a new template needs a decision here.
func kindOf(kind string) (kindInfo, bool) {
	switch kind {
	case "Deployment":
		return kindInfo{"apps/v1", func() any { return new(appsv1.Deployment) }}, true
	case "Service":
		return kindInfo{"v1", func() any { return new(corev1.Service) }}, true
	case "PersistentVolumeClaim":
		return kindInfo{"v1", func() any { return new(corev1.PersistentVolumeClaim) }}, true
	case "ConfigMap":
		return kindInfo{"v1", func() any { return new(corev1.ConfigMap) }}, true
	case "Secret":
		return kindInfo{"v1", func() any { return new(corev1.Secret) }}, true
	case "ServiceAccount":
		return kindInfo{"v1", func() any { return new(corev1.ServiceAccount) }}, true
	case "PodDisruptionBudget":
		return kindInfo{"policy/v1", func() any { return new(policyv1.PodDisruptionBudget) }}, true
	case "NetworkPolicy":
		return kindInfo{"networking.k8s.io/v1", func() any { return new(networkingv1.NetworkPolicy) }}, true
	case "Ingress":
		return kindInfo{"networking.k8s.io/v1", func() any { return new(networkingv1.Ingress) }}, true
	case "StatefulSet":
		return kindInfo{"apps/v1", func() any { return new(appsv1.StatefulSet) }}, true
	case "ServiceMonitor":
		return kindInfo{"monitoring.coreos.com/v1", func() any { return new(ServiceMonitor) }}, true
	case "PodMonitor":
		return kindInfo{"monitoring.coreos.com/v1", func() any { return new(PodMonitor) }}, true
	case "PrometheusRule":
		return kindInfo{"monitoring.coreos.com/v1", func() any { return new(PrometheusRule) }}, true
	}
	return kindInfo{}, false
}

// Decoding errors, matched with errors.Is.
var (
	errUnknownKind = errors.New("kind not rendered by this chart")
	errAPIVersion  = errors.New("unexpected apiVersion")
	errStrict      = errors.New("strict decoding failed")
)

// decodeError says which document failed and why.
type decodeError struct {
	Kind, Name string
	Err        error
}

func (e *decodeError) Error() string { return fmt.Sprintf("%s %q: %v", e.Kind, e.Name, e.Err) }
func (e *decodeError) Unwrap() error { return e.Err }

// object is one decoded manifest: its kind and a pointer to the typed value.
type object struct {
	Kind string
	Obj  any
}

// decodeStrict decodes one YAML document into the API type of its kind.
// Unknown fields, duplicate keys and wrongly typed values are errors.
func decodeStrict(doc []byte) (object, error) {
	var head struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return object{}, &decodeError{Kind: "?", Err: fmt.Errorf("%w: %v", errStrict, err)}
	}
	info, ok := kindOf(head.Kind)
	if !ok {
		return object{}, &decodeError{Kind: head.Kind, Name: head.Metadata.Name, Err: errUnknownKind}
	}
	if head.APIVersion != info.apiVersion {
		return object{}, &decodeError{Kind: head.Kind, Name: head.Metadata.Name,
			Err: fmt.Errorf("%w %q, want %q", errAPIVersion, head.APIVersion, info.apiVersion)}
	}
	obj := info.newObject()
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return object{}, &decodeError{Kind: head.Kind, Name: head.Metadata.Name, Err: fmt.Errorf("%w: %v", errStrict, err)}
	}
	return object{Kind: head.Kind, Obj: obj}, nil
}

// decodeAll splits a rendering and decodes every document strictly.
func decodeAll(stream []byte) ([]object, error) {
	docs, err := splitDocuments(stream)
	if err != nil {
		return nil, err
	}
	objs := make([]object, 0, len(docs))
	var errs []error
	for _, d := range docs {
		o, err := decodeStrict(d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		objs = append(objs, o)
	}
	return objs, errors.Join(errs...)
}

// ofType returns the decoded objects of type *T, in rendering order.
func ofType[T any](objs []object) []*T {
	var out []*T
	for _, o := range objs {
		if v, ok := o.Obj.(*T); ok {
			out = append(out, v)
		}
	}
	return out
}

// metaOf returns the ObjectMeta of any decoded object (every kind above,
// ServiceMonitor included, embeds metav1.ObjectMeta).
func metaOf(o object) metav1.Object {
	return o.Obj.(metav1.ObjectMetaAccessor).GetObjectMeta()
}
