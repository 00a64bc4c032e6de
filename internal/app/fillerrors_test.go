package app

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/fetch"
	"github.com/hubproxy/hubproxy/internal/metrics"
)

func TestFillErrorReasons(t *testing.T) {
	for err, want := range map[error]string{
		&cache.StorageError{Err: errors.New("no space left on device")}:   "storage",
		&fetch.StatusError{Code: 503}:                                     "status",
		fmt.Errorf("x: %w", &fetch.RangeError{Status: 200}):               "protocol",
		&fetch.ProtocolError{Reason: "the answer describes another file"}: "protocol",
		fmt.Errorf("body: %w", io.ErrUnexpectedEOF):                       "short_body",
		fetch.ErrLongBody: "short_body",
		fmt.Errorf("dial: %w", fetch.ErrUnavailable): "network",
		errors.New("something new"):                  "other",
	} {
		got := fillErrorReason(err)
		if got != want {
			t.Errorf("%v: %s, want %s", err, got, want)
		}
		if !slices.Contains(metrics.FillErrorReasons, got) {
			t.Errorf("%s is not a pre-seeded label value", got)
		}
	}
}
