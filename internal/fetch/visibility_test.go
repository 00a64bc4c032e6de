package fetch

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// Visibility asks without any credential, the proxy token included, and
// reads the repo's own private and gated fields in every form the hub uses.
func TestVisibilityIsAskedAnonymously(t *testing.T) {
	for _, tc := range []struct {
		body           string
		status         int
		private, gated bool
		public         bool
		refused        bool
	}{
		{`{"id":"o/m","private":false,"gated":false}`, 200, false, false, true, false},
		{`{"id":"o/m","private":false,"gated":"manual"}`, 200, false, true, false, false},
		{`{"id":"o/m","private":false,"gated":"auto"}`, 200, false, true, false, false},
		{`{"id":"o/m","private":true,"gated":false}`, 200, true, false, false, false},
		{`{"error":"Repository not found"}`, 401, false, false, false, true},
	} {
		up := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if tc.status != 200 {
				w.Header().Set("X-Error-Code", "RepoNotFound")
			}
			w.WriteHeader(tc.status)
			io.WriteString(w, tc.body)
		})
		c := newClient(t, up.URL, nil) // with a proxy token, which must not be sent
		v, err := c.Visibility(context.Background(), hub.MustRepo(hub.Model, "o/m"))
		if h := up.Hits(); len(h) != 1 || h[0].Header.Get("Authorization") != "" || h[0].URI != "/api/models/o/m" {
			t.Fatalf("%s: requests %+v", tc.body, h)
		}
		var se *StatusError
		if tc.refused {
			if !errors.As(err, &se) || se.Code != 401 || se.ErrorCode != "RepoNotFound" {
				t.Errorf("%s: err = %v", tc.body, err)
			}
			continue
		}
		if err != nil || v.Private != tc.private || v.Gated != tc.gated || v.Public() != tc.public {
			t.Errorf("%s: %+v, %v", tc.body, v, err)
		}
	}
}
