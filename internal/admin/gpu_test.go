package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/gpu"
	"github.com/hubproxy/hubproxy/internal/hubtest"
	"github.com/hubproxy/hubproxy/internal/spectest"
)

// gpuEnv is a proxy with one small model and st as its GPU copier.
func gpuEnv(t *testing.T, st *fakeStager) (*env, string) {
	t.Helper()
	e := newEnv(t, hubtest.Options{}, nil)
	e.Hub.AddRepo(hubtest.RepoSpec{ID: model.ID(), Files: []hubtest.File{
		{Path: "model.safetensors", Data: hubtest.Safetensors([]hubtest.Tensor{{Name: "w", DType: "F32", Shape: []int64{256}}}, nil)},
	}})
	return e, newAdmin(t, e, st).URL
}

func newFakeStager() *fakeStager {
	return &fakeStager{leases: map[string]*gpu.Lease{}, mem: map[string][]byte{}}
}

// postStage posts a staging request and decodes the answer.
func postStage(t *testing.T, url, body string) (*http.Response, map[string]any) {
	t.Helper()
	resp, err := http.Post(url+"/gpu/stage", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp, out
}

// TestStageOrphanedLeaseIsReleased: a client that leaves while its lease
// is being made never learns the lease's id, so nobody would release it;
// the handler releases it at once. The stager here finishes the lease
// only after the client has gone, the narrowest form of that race.
// Before, the lease stayed until its TTL (ten minutes of device memory).
func TestStageOrphanedLeaseIsReleased(t *testing.T) {
	st := newFakeStager()
	entered := make(chan struct{})
	st.beforeLease = func(ctx context.Context) error {
		close(entered)
		<-ctx.Done() // the client is gone; the lease is made all the same
		return nil
	}
	_, url := gpuEnv(t, st)
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"repo":"org/model","names":["w"],"handover":"ipc"}`
	fmt.Fprintf(conn, "POST /gpu/stage HTTP/1.1\r\nHost: admin\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	select {
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatal("the staging never started")
	}
	conn.Close()
	deadline := time.Now().Add(10 * time.Second)
	for !st.wasReleased("lease-1") {
		if time.Now().After(deadline) {
			t.Fatalf("the orphaned lease was not released; leases %v", st.Leases())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStageByUUIDAndPCIBusID: a staging names its device by UUID or PCI bus
// id (in any spelling), which mean the same device in every process, or by
// hubproxy's ordinal; a name no device has is a 400, never another GPU.
func TestStageByUUIDAndPCIBusID(t *testing.T) {
	st := newFakeStager()
	st.devs = []gpu.Device{
		{Index: 0, UUID: "GPU-aaaaaaaa-0000-0000-0000-000000000000", PCIBusID: "0000:18:00.0", Handover: gpu.HandoverFD, Health: gpu.HealthOK},
		{Index: 1, UUID: "GPU-bbbbbbbb-0000-0000-0000-000000000000", PCIBusID: "0000:3b:00.0", Handover: gpu.HandoverFD, Health: gpu.HealthOK},
	}
	_, url := gpuEnv(t, st)
	for _, tc := range []struct {
		device string
		want   int
	}{
		{`"GPU-BBBBBBBB-0000-0000-0000-000000000000"`, 1},
		{`"00000000:3B:00.0"`, 1},
		{`"0000:18:00.0"`, 0},
		{`1`, 1},
		{`"1"`, 1},
	} {
		resp, out := postStage(t, url, `{"repo":"org/model","names":["w"],"device":`+tc.device+`}`)
		if resp.StatusCode != 200 || out["device"] != float64(tc.want) || out["device_uuid"] != st.devs[tc.want].UUID {
			t.Errorf("device %s: %d %v, want device %d", tc.device, resp.StatusCode, out, tc.want)
		}
	}
	for _, bad := range []string{`"GPU-cccccccc-0000-0000-0000-000000000000"`, `"0000:99:00.0"`, `2`, `true`, `"cuda:1"`} {
		resp, out := postStage(t, url, `{"repo":"org/model","names":["w"],"device":`+bad+`}`)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("device %s: %d %v, want 400", bad, resp.StatusCode, out)
		}
	}
	if n := len(st.staged); n != 5 {
		t.Errorf("%d stagings reached the stager, want 5", n)
	}
}

// TestStageHandoverOnTCP: a file descriptor cannot travel over TCP, so on
// a loopback listener "auto" gives the IPC handover with its handle, and
// "fd" is refused as a bad request before anything is staged.
func TestStageHandoverOnTCP(t *testing.T) {
	st := newFakeStager()
	_, url := gpuEnv(t, st)
	resp, out := postStage(t, url, `{"repo":"org/model","names":["w"]}`)
	if resp.StatusCode != 200 || out["handover"] != "ipc" || out["ipc_handle"] == nil || out["held"] != false || out["expires"] == nil {
		t.Errorf("auto over TCP: %d %v", resp.StatusCode, out)
	}
	for _, body := range []string{`{"repo":"org/model","names":["w"],"handover":"fd"}`, `{"repo":"org/model","names":["w"],"handover":"dma"}`} {
		if resp, out := postStage(t, url, body); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d %v, want 400", body, resp.StatusCode, out)
		}
	}
	if len(st.staged) != 1 {
		t.Errorf("%d stagings, want 1", len(st.staged))
	}
}

// TestRenewIsTheHeartbeat: a consumer that holds no connection renews its
// lease to keep it past the TTL; an unknown lease is 404 LeaseNotFound.
func TestRenewIsTheHeartbeat(t *testing.T) {
	st := newFakeStager()
	_, url := gpuEnv(t, st)
	_, out := postStage(t, url, `{"repo":"org/model","names":["w"],"handover":"ipc"}`)
	id, _ := out["lease"].(string)
	before, _ := time.Parse(time.RFC3339Nano, out["expires"].(string))
	resp, err := http.Post(url+"/gpu/leases/"+id+"/renew", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var l map[string]any
	json.NewDecoder(resp.Body).Decode(&l)
	resp.Body.Close()
	after, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(l["expires"]))
	if resp.StatusCode != 200 || l["lease"] != id || !after.After(before) {
		t.Errorf("renew: %d %v (expires was %v)", resp.StatusCode, l, before)
	}
	resp, err = http.Post(url+"/gpu/leases/no-such-lease/renew", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("X-Error-Code") != "LeaseNotFound" {
		t.Errorf("renew of an unknown lease: %d %s", resp.StatusCode, resp.Header.Get("X-Error-Code"))
	}
}

// TestDeviceHealthInTheAPIAndMetrics: a device recovering from a sticky
// fault shows as such in /gpu/devices and in the metrics, and a staging on
// it answers 503 GPUDeviceFailed (retry), not 500.
func TestDeviceHealthInTheAPIAndMetrics(t *testing.T) {
	st := newFakeStager()
	st.devs = []gpu.Device{
		{Index: 0, UUID: "GPU-aaaaaaaa-0000-0000-0000-000000000000", Health: gpu.HealthRecovering, Faults: 2, Recoveries: 1,
			LastError: "gpu: cuEventSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS (700)", FreeBytes: -1},
		{Index: 1, UUID: "GPU-bbbbbbbb-0000-0000-0000-000000000000", Health: gpu.HealthOK, FreeBytes: 1 << 30},
	}
	e, url := gpuEnv(t, st)
	var ds struct {
		Devices []map[string]any
	}
	resp, err := http.Get(url + "/gpu/devices")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&ds)
	resp.Body.Close()
	if len(ds.Devices) != 2 || ds.Devices[0]["health"] != "recovering" || ds.Devices[0]["faults"] != float64(2) ||
		ds.Devices[0]["uuid"] != st.devs[0].UUID || ds.Devices[1]["health"] != "ok" {
		t.Errorf("/gpu/devices = %+v", ds.Devices)
	}
	resp, _ = postStage(t, url, `{"repo":"org/model","names":["w"],"device":0}`)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("X-Error-Code") != "GPUDeviceFailed" {
		t.Errorf("staging on a recovering device: %d %s", resp.StatusCode, resp.Header.Get("X-Error-Code"))
	}
	_, metrics := e.Do(http.MethodGet, "/metrics")
	for _, want := range []string{
		`hubproxy_gpu_device_healthy{device="0",uuid="GPU-aaaaaaaa-0000-0000-0000-000000000000"} 0`,
		`hubproxy_gpu_device_healthy{device="1",uuid="GPU-bbbbbbbb-0000-0000-0000-000000000000"} 1`,
		`hubproxy_gpu_device_faults_total{device="0",uuid="GPU-aaaaaaaa-0000-0000-0000-000000000000"} 2`,
		`hubproxy_gpu_device_recoveries_total{device="0",uuid="GPU-aaaaaaaa-0000-0000-0000-000000000000"} 1`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestStageAnswerMatchesTheContract: the staging answer, for both
// handovers, is what api/openapi.yaml says, key for key.
func TestStageAnswerMatchesTheContract(t *testing.T) {
	spec := spectest.Load(t)
	schema := spectest.Lookup(spec.Doc, []string{"paths", "/gpu/stage", "post", "responses", "200", "content", "application/json", "schema"})
	if schema == nil {
		t.Fatal("no schema for the staging answer")
	}
	st := newFakeStager()
	_, url := gpuEnv(t, st)
	for _, handover := range []string{"ipc", "auto"} {
		resp, err := http.Post(url+"/gpu/stage", "application/json", strings.NewReader(`{"repo":"org/model","names":["w"],"handover":"`+handover+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		var v any
		json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		spec.Conforms(t, schema.(map[string]any), v, "stage("+handover+")")
	}
}
