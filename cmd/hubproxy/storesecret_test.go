package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// The shared-store secret is a credential: `hubproxy config` and serve's
// start line say it is set, never what it is.
func TestStoreSecretNeverShown(t *testing.T) {
	const secret = "store-secret-that-must-not-show-0123456789"
	t.Setenv("HUBPROXY_SHARED_STORE_SECRET", secret)
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"config", "--json"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), secret) {
		t.Fatal("the shared-store secret was printed")
	}
	var got map[string]configEntry
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if want := (configEntry{"(set, hidden)", "env HUBPROXY_SHARED_STORE_SECRET"}); got["shared-store-secret"] != want {
		t.Errorf("shared-store-secret = %+v, want %+v", got["shared-store-secret"], want)
	}
	l, err := loadWith(t, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if attrs := fmt.Sprint(l.logAttrs()...); strings.Contains(attrs, secret) {
		t.Errorf("serve's start line shows the secret: %s", attrs)
	}
}
