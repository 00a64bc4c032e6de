package sharedstore

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/smithy-go/logging"
)

// The SDK's classifications land at slog's levels, as records of the
// logger given, with the component named; below the logger's level
// nothing is written.
func TestSDKLoggerWritesToSlog(t *testing.T) {
	var buf bytes.Buffer
	l := newSDKLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})))
	l.Logf(logging.Warn, "falling back to IMDSv1: %v", "403")
	l.Logf(logging.Debug, "request %d", 7)
	got := buf.String()
	if !strings.Contains(got, `level=WARN msg="falling back to IMDSv1: 403" component=aws-sdk`) {
		t.Errorf("warn line: %q", got)
	}
	if strings.Contains(got, "request 7") {
		t.Errorf("a debug line was written at warn: %q", got)
	}

	buf.Reset()
	l = newSDKLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	logging.WithContext(context.Background(), l).Logf(logging.Debug, "request %d", 7)
	if !strings.Contains(buf.String(), `level=DEBUG msg="request 7" component=aws-sdk`) {
		t.Errorf("debug line: %q", buf.String())
	}
	newSDKLogger(nil).Logf(logging.Warn, "to nowhere") // nil discards, never panics
}

func TestIMDSOnlyForAWSEndpoints(t *testing.T) {
	for endpoint, want := range map[string]bool{
		"":                                   true,
		"https://s3.us-east-1.amazonaws.com": true,
		"https://bucket.vpce-1a2b.s3.eu-west-1.vpce.amazonaws.com": true,
		"https://s3.cn-north-1.amazonaws.com.cn":                   true,
		"http://127.0.0.1:9000":                                    false,
		"https://minio.internal:9000":                              false,
		"https://amazonaws.com.evil.example":                       false,
	} {
		if got := imdsMayHelp(endpoint); got != want {
			t.Errorf("imdsMayHelp(%q) = %v, want %v", endpoint, got, want)
		}
	}
}
