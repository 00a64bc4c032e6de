package chartcheck

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type networkPolicy = networkingv1.NetworkPolicy

// workload is the pod-owning object of a rendering (the standalone
// Deployment, or the sidecar mode's Deployment or StatefulSet), reduced to
// what the checks need.
type workload struct {
	kind, name string
	replicas   *int32
	selector   *metav1.LabelSelector
	template   *corev1.PodTemplateSpec
	strategy   *appsv1.DeploymentStrategy // Deployments only
}

// spec is the pod spec of the workload's template.
func (w workload) spec() *corev1.PodSpec { return &w.template.Spec }

// podLabels are the labels its pods carry.
func (w workload) podLabels() map[string]string { return w.template.Labels }

// workloads finds every Deployment and StatefulSet.
func workloads(objs []object) []workload {
	var out []workload
	for _, d := range ofType[appsv1.Deployment](objs) {
		out = append(out, workload{kind: "Deployment", name: d.Name, replicas: d.Spec.Replicas,
			selector: d.Spec.Selector, template: &d.Spec.Template, strategy: &d.Spec.Strategy})
	}
	for _, s := range ofType[appsv1.StatefulSet](objs) {
		out = append(out, workload{kind: "StatefulSet", name: s.Name, replicas: s.Spec.Replicas,
			selector: s.Spec.Selector, template: &s.Spec.Template})
	}
	return out
}
