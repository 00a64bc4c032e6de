package server

import (
	"strings"
	"testing"
)

// The access log's query hides credentials wherever they stand in it: a
// raw '#' in a request's query is part of the query, not a fragment that
// redaction may skip.
func TestLogQueryHidesCredentials(t *testing.T) {
	for _, raw := range []string{"token=hf_s3cr3t", "a=1&access_token=hf_s3cr3t", "a=1#token=hf_s3cr3t"} {
		if got := logQuery(raw); strings.Contains(got, "hf_s3cr3t") {
			t.Errorf("logQuery(%q) = %q: the credential is in the log", raw, got)
		}
	}
}
