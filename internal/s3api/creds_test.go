package s3api

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadCredentials(t *testing.T) {
	name := writeFile(t, "# comment\n\n  AKIDONE  secret-one   hf_tokenOne  \nAKID.two-2_x\tsecret/two+=\t-\n", 0o640)
	keys, err := readCredentials(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 {
		t.Fatalf("%d keys: %v", len(keys), keys)
	}
	one, two := keys["AKIDONE"], keys["AKID.two-2_x"]
	if one.secret != "secret-one" || one.caller.Auth() != "Bearer hf_tokenOne" {
		t.Errorf("AKIDONE = %v %q", one, one.secret)
	}
	if two.secret != "secret/two+=" || !two.caller.Anonymous() {
		t.Errorf("AKID.two-2_x = %v %q", two, two.secret)
	}
	// Printing a key never prints its secret or token.
	for _, s := range []string{fmt.Sprint(keys), fmt.Sprintf("%v %+v %#v", one, one, one)} {
		if strings.Contains(s, "secret-one") || strings.Contains(s, "hf_tokenOne") {
			t.Errorf("printed: %s", s)
		}
	}
}

func TestReadCredentialsRefusesOpenModes(t *testing.T) {
	for _, perm := range []os.FileMode{0o644, 0o604, 0o602, 0o601, 0o666} {
		name := writeFile(t, "AKIDONE secret hf_x\n", perm)
		_, err := readCredentials(name)
		if err == nil || !strings.Contains(err.Error(), "other users may open it") || !strings.Contains(err.Error(), fmt.Sprintf("%04o", perm)) {
			t.Errorf("mode %04o: %v", perm, err)
		}
	}
	for _, perm := range []os.FileMode{0o600, 0o640, 0o400, 0o440} {
		name := writeFile(t, "AKIDONE secret hf_x\n", perm)
		if _, err := readCredentials(name); err != nil {
			t.Errorf("mode %04o: %v", perm, err)
		}
	}
	if _, err := readCredentials(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory: %v", err)
	}
	if _, err := readCredentials(filepath.Join(t.TempDir(), "missing")); !os.IsNotExist(err) {
		t.Errorf("missing file: %v", err)
	}
	// NewAuthenticator says which setting failed.
	name := writeFile(t, "AKIDONE secret hf_x\n", 0o644)
	if _, err := NewAuthenticator(AuthOptions{CredentialsFile: name}); err == nil || !strings.HasPrefix(err.Error(), "s3-credentials-file: ") {
		t.Errorf("NewAuthenticator: %v", err)
	}
}

func TestReadCredentialsBadLines(t *testing.T) {
	cases := []struct{ content, want string }{
		{"", "lists no access keys"},
		{"# only a comment\n\n", "lists no access keys"},
		{"AKIDONE secretValue\n", ":1: a line is ACCESS_KEY_ID SECRET_ACCESS_KEY HUB_TOKEN"},
		{"AKIDONE\n", ":1: a line is"},
		{"AKIDONE secretValue hf_tokenValue extra\n", ":1: a line is"},
		{"# c\nAK/ID secretValue hf_tokenValue\n", ":2: an access key id is"},
		{"hf_lookslikeatoken secretValue hf_tokenValue\n", ":1: an access key id starting with hf_"},
		{"AKIDONE secretValue hf_tokenValue\n\nAKIDONE secretValue2 -\n", ":3: the access key id of line 1 again"},
	}
	for _, c := range cases {
		name := writeFile(t, c.content, 0o600)
		_, err := readCredentials(name)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want %q", c.content, err, c.want)
			continue
		}
		for _, secret := range []string{"secretValue", "hf_tokenValue", "hf_lookslikeatoken"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%q: the error shows %s: %v", c.content, secret, err)
			}
		}
	}
}
