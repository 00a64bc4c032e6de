package chartcheck

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// This file is the part of the kubelet's container start the boot test needs:
// the argv and environment a container gets from its image and its spec.

// containerArgv is what the container runtime executes. Kubernetes' rules: a
// container's command replaces the image's ENTRYPOINT, its args replace the
// image's CMD, and a command without args drops CMD too. $(VAR) in command
// and args expands from the container's environment.
func containerArgv(entrypoint, cmd []string, c *corev1.Container, env map[string]string) []string {
	var argv []string
	switch {
	case len(c.Command) > 0:
		argv = slices.Concat(c.Command, c.Args)
	case len(c.Args) > 0:
		argv = slices.Concat(entrypoint, c.Args)
	default:
		argv = slices.Concat(entrypoint, cmd)
	}
	for i, a := range argv {
		argv[i] = expandVars(a, env)
	}
	return argv
}

// secretSource looks up a key of a Secret or ConfigMap the pod references,
// rendered by the chart or present in the test's cluster.
type secretSource func(kind, name, key string) (string, error)

// containerEnv is the process environment: the image's variables, then the
// container's, each later one replacing an earlier of the same name, values
// expanded from the variables before them, valueFrom resolved through src.
func containerEnv(imageEnv []string, c *corev1.Container, src secretSource) (map[string]string, error) {
	env := map[string]string{}
	for _, kv := range imageEnv {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = expandVars(e.Value, env)
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			v, err := src("Secret", ref.Name, ref.Key)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			env[e.Name] = v
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			v, err := src("ConfigMap", ref.Name, ref.Key)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			env[e.Name] = v
		default:
			return nil, fmt.Errorf("env %s: valueFrom %+v is not modelled by this test", e.Name, e.ValueFrom)
		}
	}
	return env, nil
}

// expandVars applies Kubernetes' $(VAR) expansion: a defined variable is
// replaced, an undefined reference is left as written, and $$ escapes $.
func expandVars(s string, env map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] != '$' || i+1 == len(s):
			b.WriteByte(s[i])
		case s[i+1] == '$':
			b.WriteByte('$')
			i++
		case s[i+1] == '(':
			end := strings.IndexByte(s[i:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+end]
			if v, ok := env[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+end+1])
			}
			i += end
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// TestContainerArgvFollowsKubernetes pins the rules the boot test applies,
// including the combination the chart shipped with: an image whose
// ENTRYPOINT already said "serve" under args that say it again.
func TestContainerArgvFollowsKubernetes(t *testing.T) {
	env := map[string]string{"DIR": "/etc/x"}
	for _, tc := range []struct {
		name            string
		entrypoint, cmd []string
		command, args   []string
		want            []string
	}{
		{"image only", []string{"/hubproxy"}, []string{"serve"}, nil, nil, []string{"/hubproxy", "serve"}},
		{"args replace CMD", []string{"/hubproxy"}, []string{"serve"}, nil, []string{"serve", "--config=$(DIR)/a"}, []string{"/hubproxy", "serve", "--config=/etc/x/a"}},
		{"command drops CMD", []string{"/hubproxy"}, []string{"serve"}, []string{"/bin/other"}, nil, []string{"/bin/other"}},
		{"command and args", []string{"/hubproxy"}, []string{"serve"}, []string{"/bin/other"}, []string{"a"}, []string{"/bin/other", "a"}},
		{"the old image under the chart's args", []string{"/hubproxy", "serve"}, nil, nil, []string{"serve", "--config=/c"}, []string{"/hubproxy", "serve", "serve", "--config=/c"}},
		{"escapes and unknown variables", []string{"/e"}, nil, nil, []string{"$$(DIR)", "$(NOPE)", "$"}, []string{"/e", "$(DIR)", "$(NOPE)", "$"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &corev1.Container{Command: tc.command, Args: tc.args}
			if got := containerArgv(tc.entrypoint, tc.cmd, c, env); !slices.Equal(got, tc.want) {
				t.Errorf("argv = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestContainerEnvLayering: the container's variables replace the image's and
// may refer to earlier ones.
func TestContainerEnvLayering(t *testing.T) {
	c := &corev1.Container{Env: []corev1.EnvVar{
		{Name: "HUBPROXY_CACHE_DIR", Value: "/cache"},
		{Name: "B", Value: "$(HUBPROXY_CACHE_DIR)/b"},
		{Name: "T", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}},
	}}
	src := func(kind, name, key string) (string, error) { return kind + "/" + name + "/" + key, nil }
	env, err := containerEnv([]string{"HUBPROXY_CACHE_DIR=/var/cache/hubproxy", "PATH=/bin"}, c, src)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"HUBPROXY_CACHE_DIR": "/cache", "B": "/cache/b", "T": "Secret/s/k", "PATH": "/bin"}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
}
