package admin_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/hubproxy/hubproxy/internal/admin"
)

// adminAs serves e's admin API (the same handler, so the same leases) to a
// consumer running as uid: its connections carry that uid as their peer
// credential, as SO_PEERCRED would report it on the Unix socket.
func adminAs(t *testing.T, e *env, uid uint32) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(e.Admin)
	srv.Config.ConnContext = admin.ConnAs(uid)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// operatorAdmin serves e's admin API to hubproxy's own uid, the operator.
func operatorAdmin(t *testing.T, e *env) string { return adminAs(t, e, uint32(os.Geteuid())) }

// leaseIDs lists the leases url's caller sees, sorted.
func leaseIDs(t *testing.T, url string) []string {
	t.Helper()
	resp, err := http.Get(url + "/gpu/leases")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("list leases: %d %s", resp.StatusCode, resp.Header.Get("X-Error-Message"))
	}
	var ls admin.LeasesResponse
	json.NewDecoder(resp.Body).Decode(&ls)
	ids := []string{}
	for _, l := range ls.Leases {
		ids = append(ids, l.ID)
	}
	slices.Sort(ids)
	return ids
}

// leaseCall sends method to a lease route and returns the status, error
// code and error message.
func leaseCall(t *testing.T, method, url string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("X-Error-Code"), resp.Header.Get("X-Error-Message")
}

func stageID(t *testing.T, url string) string {
	t.Helper()
	resp, out := postStage(t, url, `{"repo":"org/model","names":["w"],"handover":"ipc"}`)
	id, _ := out["lease"].(string)
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("stage: %d %v", resp.StatusCode, out)
	}
	return id
}

// TestLeaseIsItsStagersOwn: two consumers under different uids share the
// admin socket; each lists, renews and releases only its own leases. To B,
// A's lease does not exist: not listed, renewing it is the 404 of an
// unknown id word for word, and releasing it answers 204 like any unknown
// id and frees nothing. Before, any caller listed every lease id and could
// free any consumer's GPU memory.
func TestLeaseIsItsStagersOwn(t *testing.T) {
	st := newFakeStager()
	e, _ := gpuEnv(t, st)
	me := uint32(os.Geteuid())
	a, b := adminAs(t, e, me+1001), adminAs(t, e, me+1002)
	idA, idB := stageID(t, a), stageID(t, b)

	if got := leaseIDs(t, b); !slices.Equal(got, []string{idB}) {
		t.Errorf("B lists %v, want only its own %s", got, idB)
	}
	code, ecode, msg := leaseCall(t, http.MethodPost, b+"/gpu/leases/"+idA+"/renew")
	// The stager's own answer for an id it does not know.
	_, _, unknownMsg := leaseCall(t, http.MethodPost, operatorAdmin(t, e)+"/gpu/leases/lease-999/renew")
	if code != http.StatusNotFound || ecode != "LeaseNotFound" || msg != strings.ReplaceAll(unknownMsg, "lease-999", idA) {
		t.Errorf("B renewing A's lease: %d %s %q; want the 404 of an unknown id (%q)", code, ecode, msg, unknownMsg)
	}
	if code, _, _ := leaseCall(t, http.MethodDelete, b+"/gpu/leases/"+idA); code != http.StatusNoContent || st.wasReleased(idA) {
		t.Errorf("B releasing A's lease: %d, released %v; want 204 and nothing freed", code, st.wasReleased(idA))
	}

	if got := leaseIDs(t, a); !slices.Equal(got, []string{idA}) {
		t.Errorf("A lists %v, want only its own %s", got, idA)
	}
	if code, ecode, msg := leaseCall(t, http.MethodPost, a+"/gpu/leases/"+idA+"/renew"); code != http.StatusOK {
		t.Errorf("A renewing its lease: %d %s %s", code, ecode, msg)
	}
	if code, _, _ := leaseCall(t, http.MethodDelete, a+"/gpu/leases/"+idA); code != http.StatusNoContent || !st.wasReleased(idA) {
		t.Errorf("A releasing its lease: %d, released %v", code, st.wasReleased(idA))
	}
	if got := leaseIDs(t, a); len(got) != 0 {
		t.Errorf("A lists %v after releasing its lease", got)
	}
	if st.wasReleased(idB) {
		t.Error("B's lease was released")
	}
}

// TestOperatorSeesAndEndsEveryLease: hubproxy's own uid is the operator's
// (a check run by whoever runs hubproxy, a shell in its container): it
// lists every consumer's leases, anonymous ones included, and renews and
// releases any of them.
func TestOperatorSeesAndEndsEveryLease(t *testing.T) {
	st := newFakeStager()
	e, anon := gpuEnv(t, st)
	me := uint32(os.Geteuid())
	op := operatorAdmin(t, e)
	idA, idB, idN := stageID(t, adminAs(t, e, me+1001)), stageID(t, adminAs(t, e, me+1002)), stageID(t, anon)
	want := []string{idA, idB, idN}
	slices.Sort(want)
	if got := leaseIDs(t, op); !slices.Equal(got, want) {
		t.Errorf("the operator lists %v, want %v", got, want)
	}
	if code, _, msg := leaseCall(t, http.MethodPost, op+"/gpu/leases/"+idA+"/renew"); code != http.StatusOK {
		t.Errorf("the operator renewing A's lease: %d %s", code, msg)
	}
	for _, id := range want {
		if code, _, _ := leaseCall(t, http.MethodDelete, op+"/gpu/leases/"+id); code != http.StatusNoContent || !st.wasReleased(id) {
			t.Errorf("the operator releasing %s: %d, released %v", id, code, st.wasReleased(id))
		}
	}
}

// TestAnonymousLeaseIsHeldByItsID: on a loopback TCP admin listener no
// peer credential exists. Such a caller cannot list (the list would hand
// out the ids), renews and releases its lease by the id its staging
// answered, and cannot touch a lease that has an owner; a consumer with a
// uid does not see the anonymous lease either.
func TestAnonymousLeaseIsHeldByItsID(t *testing.T) {
	st := newFakeStager()
	e, anon := gpuEnv(t, st) // served with ConnContext over TCP, as serve.go does
	a := adminAs(t, e, uint32(os.Geteuid())+1001)
	idA, idN := stageID(t, a), stageID(t, anon)

	resp, err := http.Get(anon + "/gpu/leases")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Header.Get("X-Error-Message"), "Unix socket") {
		t.Errorf("listing over TCP: %d %q, want 400 naming the Unix socket", resp.StatusCode, resp.Header.Get("X-Error-Message"))
	}
	if got := leaseIDs(t, a); !slices.Equal(got, []string{idA}) {
		t.Errorf("A lists %v, want only its own %s", got, idA)
	}
	if code, ecode, _ := leaseCall(t, http.MethodPost, anon+"/gpu/leases/"+idA+"/renew"); code != http.StatusNotFound || ecode != "LeaseNotFound" {
		t.Errorf("anonymous renew of A's lease: %d %s, want 404 LeaseNotFound", code, ecode)
	}
	if code, _, _ := leaseCall(t, http.MethodDelete, anon+"/gpu/leases/"+idA); code != http.StatusNoContent || st.wasReleased(idA) {
		t.Errorf("anonymous release of A's lease: %d, released %v; want 204 and nothing freed", code, st.wasReleased(idA))
	}
	if code, _, msg := leaseCall(t, http.MethodPost, anon+"/gpu/leases/"+idN+"/renew"); code != http.StatusOK {
		t.Errorf("renewing the anonymous lease by its id: %d %s", code, msg)
	}
	if code, _, _ := leaseCall(t, http.MethodDelete, anon+"/gpu/leases/"+idN); code != http.StatusNoContent || !st.wasReleased(idN) {
		t.Errorf("releasing the anonymous lease by its id: %d, released %v", code, st.wasReleased(idN))
	}
}
