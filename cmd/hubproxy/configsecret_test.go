package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// leak is the credential every value below carries somewhere.
const leak = "hunter2"

// `hubproxy config`, in both forms, and serve's start-up line show every
// key, but never a credential inside a URL.
func TestConfigOutputHidesSecretsInURLs(t *testing.T) {
	env := map[string]string{
		"HUBPROXY_UPSTREAM":       "http://user:" + leak + "@hub.example",
		"HUBPROXY_PUBLIC_URL":     "https://proxy.example/?token=" + leak,
		"HUBPROXY_REDIRECT_HOSTS": "hf.co,https://cdn.example/?X-Amz-Signature=" + leak,
		"HUBPROXY_SHARED_STORE":   "s3://bucket?endpoint=http://minio:9000",
		"HUBPROXY_UPSTREAM_TOKEN": leak,
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	for _, args := range [][]string{{"config"}, {"config", "--json"}} {
		cmd := newRootCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs(args)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if strings.Contains(out.String(), leak) {
			t.Errorf("%v prints a secret:\n%s", args, out.String())
		}
		if !strings.Contains(out.String(), "hub.example") || !strings.Contains(out.String(), "minio:9000") {
			t.Errorf("%v no longer shows the URLs:\n%s", args, out.String())
		}
	}
	l, err := loadWith(t, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if line := fmt.Sprint(l.logAttrs()...); strings.Contains(line, leak) {
		t.Errorf("the start-up log shows a secret: %s", line)
	}
}

// An invalid value is refused in words that name the key, where it came
// from and what is wrong, but not the credential it carries.
func TestConfigErrorsHideSecrets(t *testing.T) {
	for name, tc := range map[string]struct {
		file string
		env  map[string]string
		args []string
		want []string
	}{
		"upstream scheme":       {env: map[string]string{"HUBPROXY_UPSTREAM": "ftp://user:" + leak + "@hub.example"}, want: []string{"upstream", "hub.example", "http(s)"}},
		"upstream as a list":    {file: "upstream: [\"http://user:" + leak + "@hub.example\"]\n", want: []string{"upstream", "not a single value"}},
		"store query secret":    {args: []string{"--shared-store", "s3://bucket?secret_key=" + leak}, want: []string{"shared-store", "secret_key"}},
		"store signature":       {args: []string{"--shared-store", "s3://bucket?aws_secret_access_key=" + leak}, want: []string{"shared-store", "aws_secret_access_key"}},
		"token as a list":       {file: "upstream-token: [\"" + leak + "\"]\n", want: []string{"upstream-token", "secret"}},
		"public-url with token": {env: map[string]string{"HUBPROXY_PUBLIC_URL": "/relative?token=" + leak}, want: []string{"public-url", "absolute"}},
		"listen as a list":      {file: "listen: [\"http://u:" + leak + "@x\"]\n", want: []string{"listen"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadWith(t, tc.file, tc.env, tc.args...)
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.Contains(err.Error(), leak) {
				t.Errorf("the error shows the secret: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
