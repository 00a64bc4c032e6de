package fetch

import (
	"errors"
	"fmt"
	"testing"
)

// TestStatusErrorIsRefused pins the one refusal rule resolver and repofs
// both rely on: 401, 403, and the 404s that hide a repo, wherever they
// were answered; never a missing file or revision, nor an outage.
func TestStatusErrorIsRefused(t *testing.T) {
	for _, tc := range []struct {
		code      int
		errorCode string
		download  bool
		want      bool
	}{
		{401, "", false, true},
		{403, "", false, true},
		{401, "", true, true},
		{403, "", true, true},
		{404, "RepoNotFound", false, true},
		{404, "GatedRepo", false, true},
		{403, "GatedRepo", false, true},
		{404, "EntryNotFound", false, false},
		{404, "RevisionNotFound", false, false},
		{404, "", false, false},
		{410, "", true, false},
		{500, "", false, false},
		{429, "", false, false},
		{400, "", false, false},
	} {
		err := fmt.Errorf("wrapped: %w", &StatusError{Code: tc.code, ErrorCode: tc.errorCode, download: tc.download})
		if got := errors.Is(err, ErrRefused); got != tc.want {
			t.Errorf("%d %q download=%v: Is(ErrRefused) = %v, want %v", tc.code, tc.errorCode, tc.download, got, tc.want)
		}
	}
	if errors.Is(&netError{err: errors.New("reset")}, ErrRefused) {
		t.Error("a transport failure matched ErrRefused")
	}
}
