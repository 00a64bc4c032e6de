package repoapi

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// Cached answers are found by metaKey, so its bytes must stay what earlier
// versions wrote: the caller part is the hex sha256 of the Authorization
// value, which is what hub.Caller.ID is.
func TestMetaKeyKeepsItsFormat(t *testing.T) {
	hexSum := func(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }
	body := []byte(`{"paths":["a"]}`)
	for _, auth := range []string{"", "Bearer hf_a"} {
		want := "api\x00" + hexSum([]byte(auth)) + "\x00POST\x00/api/models/org/m/paths-info/main\x00application/json\x00" + hexSum(body)
		if got := metaKey(hub.NewCaller(auth), "POST", "/api/models/org/m/paths-info/main", "application/json", body); got != want {
			t.Errorf("metaKey for %q = %q, want %q", auth, got, want)
		}
	}
	if metaKey(hub.Caller{}, "GET", "/x", "", nil) != metaKey(hub.NewCaller(""), "GET", "/x", "", nil) {
		t.Error("the zero Caller keys answers apart from the anonymous one")
	}
}
