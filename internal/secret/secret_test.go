package secret

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
)

// The credentials a URL can carry are hidden; the rest stays as written.
func TestURL(t *testing.T) {
	for raw, want := range map[string]string{
		"http://user:SECRET@host:8080/p":                               "http://user:" + Mask + "@host:8080/p",
		"https://hf_SECRET@hub.example":                                "https://" + Mask + "@hub.example",
		"http://u:p@SECRET@host/":                                      "http://u:" + Mask + "@host/",
		"s3://b/pre?endpoint=http://minio:9000&secret_key=SECRET":      "s3://b/pre?endpoint=http://minio:9000&secret_key=" + Mask,
		"s3://b?aws_secret_access_key=SECRET&region=eu":                "s3://b?aws_secret_access_key=" + Mask + "&region=eu",
		"https://cdn/x?X-Amz-Signature=SECRET&X-Amz-Expires=60":        "https://cdn/x?X-Amz-Signature=" + Mask + "&X-Amz-Expires=60",
		"http://h/?token=SECRET":                                       "http://h/?token=" + Mask,
		"s3://b?endpoint=" + "http%3A%2F%2Fak%3ASECRET%40minio%3A9000": "s3://b?endpoint=http%3A%2F%2Fak%3A" + Mask + "%40minio%3A9000",
		"https://huggingface.co":                                       "https://huggingface.co",
		"dir:/models":                                                  "dir:/models",
		":8080":                                                        ":8080",
		"hf.co":                                                        "hf.co",
		"s3://b?use_path_style=true&region=us-east-1":                  "s3://b?use_path_style=true&region=us-east-1",
		"http://[::1:bad/?token=SECRET":                                "http://[::1:bad/?token=" + Mask,
	} {
		got := URL(raw)
		if got != want {
			t.Errorf("URL(%q) = %q, want %q", raw, got, want)
		}
		if strings.Contains(got, "SECRET") {
			t.Errorf("URL(%q) leaks: %q", raw, got)
		}
	}
}

// Text finds credentials inside messages, quoted or not.
func TestText(t *testing.T) {
	for _, s := range []string{
		`upstream "http://user:SECRET@host": must be an http(s) URL`,
		`shared-store: s3://b?secret_key=SECRET: unknown query key "secret_key"`,
		`GET https://cdn/x?X-Amz-Signature=SECRET&a=b failed`,
		`password=SECRET, token=SECRET`,
	} {
		if got := Text(s); strings.Contains(got, "SECRET") {
			t.Errorf("Text(%q) = %q", s, got)
		}
	}
	if s := "revision-ttl (from env HUBPROXY_REVISION_TTL): \"30\" has no unit"; Text(s) != s {
		t.Errorf("Text changed a message with no secret: %q", Text(s))
	}
}

// A command line keeps its shape, with flag values and URL credentials hidden.
func TestArgs(t *testing.T) {
	in := []string{"hubproxy", "serve", "--upstream-token", "hf_SECRET", "--token=SECRET", "--aws-secret=SECRET",
		"--db-password", "SECRET", "--upstream", "http://u:SECRET@h", "--shared-store=s3://b?secret_key=SECRET", "--offline", "--listen", ":8080"}
	got := Args(in)
	if len(got) != len(in) {
		t.Fatalf("len %d, want %d", len(got), len(in))
	}
	if j := strings.Join(got, " "); strings.Contains(j, "SECRET") {
		t.Errorf("Args leaks: %s", j)
	}
	for i, want := range map[int]string{2: "--upstream-token", 3: Mask, 4: "--token=" + Mask, 11: "--offline", 13: ":8080"} {
		if got[i] != want {
			t.Errorf("arg %d = %q, want %q", i, got[i], want)
		}
	}
	if in[3] != "hf_SECRET" {
		t.Error("Args changed its input")
	}
}

// Error hides the message's secrets but keeps the chain.
func TestError(t *testing.T) {
	base := &fs.PathError{Op: "open", Path: "http://u:SECRET@h", Err: fs.ErrNotExist}
	err := Error(base)
	if strings.Contains(err.Error(), "SECRET") {
		t.Errorf("Error leaks: %v", err)
	}
	var pe *fs.PathError
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) {
		t.Error("the chain is lost")
	}
	if Error(nil) != nil {
		t.Error("Error(nil) != nil")
	}
}
