package sharedstore

import (
	"errors"
	"strings"
	"testing"
)

// A refused URL is named in the error without the credentials it carries,
// in its userinfo or its query.
func TestParseURLErrorHidesSecrets(t *testing.T) {
	for _, raw := range []string{
		"s3://bucket?secret_key=hunter2",
		"s3://bucket?aws_secret_access_key=hunter2&region=eu",
		"s3://bucket?endpoint=http://minio:9000&X-Amz-Signature=hunter2",
		"s3://ak:hunter2@bucket",
		"s3://bucket?endpoint=http://ak:hunter2@minio:9000",
	} {
		_, err := ParseURL(raw)
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Fatalf("%s: %v, want a ConfigError", raw, err)
		}
		if strings.Contains(err.Error(), "hunter2") || strings.Contains(ce.URL, "hunter2") {
			t.Errorf("%s: the error shows a secret: %v", raw, err)
		}
		if !strings.Contains(ce.URL, "bucket") {
			t.Errorf("%s: the error no longer names the URL: %v", raw, err)
		}
	}
}
