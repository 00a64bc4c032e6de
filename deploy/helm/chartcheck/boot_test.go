package chartcheck

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/hubproxy/hubproxy/internal/child"
	"github.com/hubproxy/hubproxy/internal/hubtest"
	"github.com/hubproxy/hubproxy/internal/sharedfill"
	"github.com/hubproxy/hubproxy/internal/sharedstore/miniotest"
	"github.com/hubproxy/hubproxy/internal/testutil"
)

// The repo every booted hubproxy serves a file of, from the fake hub or, in
// air-gapped mode, from the models volume.
const (
	bootRepo = "acme/tiny"
	bootFile = "config.json"
	bootData = `{"model_type": "tiny", "note": "served through a booted chart"}`
	// bootClientToken is the caller's token: listed where a scenario sets
	// client-tokens-file, and accepted by the fake hub for a public repo.
	bootClientToken = "hf_bootTestClientToken"
	// bootStoreSecret is the cluster's shared-store secret, in the Secret
	// a store scenario names (with a newline, as a file-made Secret has).
	bootStoreSecret = "boot-test-store-secret-0123456789abcdef"
)

// TestChartBoots runs what the chart renders instead of only reading it: for
// every scenario it takes the image's ENTRYPOINT and CMD (from an image built
// here with deploy/image), the hubproxy container's command, args and env,
// and its volumes laid out under a temporary root, starts the real binary the
// way the kubelet would, and waits for the startup and readiness probes to
// pass on the rendered port. Then a file is fetched through it from the
// scenario's upstream (a fake hub over http, over https with a private CA when
// the scenario sets caBundle, or a models volume for a dir: upstream), the
// admin socket answers, and SIGTERM ends it with status 0.
func TestChartBoots(t *testing.T) {
	img := buildImage(t)
	hub := hubtest.NewT(t, hubtest.Options{})
	hub.AddRepo(hubtest.RepoSpec{ID: bootRepo, Files: []hubtest.File{{Path: bootFile, Data: []byte(bootData)}}})
	tlsHub, caPEM := tlsFront(t, hub.URL)
	for _, sc := range scenarios(t) {
		t.Run(sc.name, func(t *testing.T) {
			values := scenarioValues(t, sc)
			cluster := testCluster{
				secrets: map[string]map[string][]byte{
					"hf-token":               {"HF_TOKEN": []byte(dummyToken)},
					"hubproxy-client-tokens": {"tokens": []byte("# accepted callers\n" + bootClientToken + "\n")},
				},
				configMaps: map[string]map[string]string{},
				claims: map[string]func(*testing.T, string){"models": func(t *testing.T, dir string) {
					writeFile(t, filepath.Join(dir, bootRepo, bootFile), bootData)
				}, "hubproxy-shared": func(*testing.T, string) {}}, // an empty RWX volume
			}
			port := freePort(t)
			flags := []string{"--set", fmt.Sprintf("config.listen=:%d", port)}
			if sc.valuesFile != "" {
				flags = append([]string{"--values", sc.valuesFile}, flags...)
			}
			switch {
			case strings.HasPrefix(values.upstream, "dir:"):
			case values.caBundle != nil:
				// The private CA is trusted only through the bundle the
				// scenario names: without SSL_CERT_FILE the fetch fails.
				flags = append(flags, "--set", "config.upstream="+tlsHub)
				cluster.configMaps[values.caBundle.ConfigMap] = map[string]string{values.caBundle.Key: caPEM}
			default:
				flags = append(flags, "--set", "config.upstream="+hub.URL)
			}
			if values.storeSeal != "" {
				cluster.secrets[values.storeSeal] = map[string][]byte{values.storeSealKey: []byte(bootStoreSecret + "\n")}
				cluster.logged = append(cluster.logged, "secret_id="+sharedfill.SecretID([]byte(bootStoreSecret)))
			}
			if strings.HasPrefix(values.sharedStore, "s3://") {
				// The scenario's bucket, on a real S3 server here, with
				// the server's keys in the Secret the scenario names.
				m := miniotest.Start(t)
				flags = append(flags, "--set-string", "config.shared-store="+m.URL("boot"))
				cluster.secrets[values.storeSecret] = map[string][]byte{
					"AWS_ACCESS_KEY_ID": []byte(miniotest.AccessKey), "AWS_SECRET_ACCESS_KEY": []byte(miniotest.SecretKey)}
			}
			objs := renderWith(t, flags...)
			bootHubproxy(t, img, objs, cluster)
		})
	}
}

// scenarioBoot is what the boot test needs to know of a scenario's values.
type scenarioBoot struct {
	upstream string
	caBundle *struct{ ConfigMap, Key string }
	// sharedStore is config.shared-store, storeSecret the Secret of its
	// keys, and storeSeal and storeSealKey where its sealing secret is.
	sharedStore, storeSecret, storeSeal, storeSealKey string
}

func scenarioValues(t *testing.T, sc scenario) scenarioBoot {
	t.Helper()
	var v struct {
		Config   map[string]any `json:"config"`
		CABundle struct {
			ConfigMap string `json:"configMap"`
			Key       string `json:"key"`
		} `json:"caBundle"`
		SharedStore struct {
			Credentials struct {
				ExistingSecret string `json:"existingSecret"`
			} `json:"credentials"`
			Secret struct {
				ExistingSecret string `json:"existingSecret"`
				Key            string `json:"key"`
			} `json:"secret"`
		} `json:"sharedStore"`
	}
	if sc.valuesFile != "" {
		b, err := os.ReadFile(sc.valuesFile)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
	}
	out := scenarioBoot{}
	out.upstream, _ = v.Config["upstream"].(string)
	out.sharedStore, _ = v.Config["shared-store"].(string)
	out.storeSecret = v.SharedStore.Credentials.ExistingSecret
	out.storeSeal, out.storeSealKey = v.SharedStore.Secret.ExistingSecret, v.SharedStore.Secret.Key
	if out.storeSealKey == "" {
		out.storeSealKey = "secret" // values.yaml's
	}
	if v.CABundle.ConfigMap != "" {
		out.caBundle = &struct{ ConfigMap, Key string }{v.CABundle.ConfigMap, v.CABundle.Key}
	}
	return out
}

// bootHubproxy starts the rendered hubproxy container and checks it serves.
func bootHubproxy(t *testing.T, img builtImage, objs []object, cluster testCluster) {
	t.Helper()
	ws := workloads(objs)
	if len(ws) != 1 {
		t.Fatalf("%d workloads", len(ws))
	}
	spec := ws[0].spec()
	c, _ := findContainer(spec, hubproxyContainer)
	if c == nil {
		t.Fatal("no hubproxy container")
	}
	root := podRoot{dir: t.TempDir()}
	if err := root.extractImage(img.files); err != nil {
		t.Fatal(err)
	}
	root.mountVolumes(t, spec, c, objs, cluster)

	env, err := containerEnv(img.config.Env, c, cluster.lookup(objs))
	if err != nil {
		t.Fatal(err)
	}
	argv := containerArgv(img.config.Entrypoint, img.config.Cmd, c, env)
	for i := range argv {
		argv[i] = root.relocate(argv[i])
	}
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+root.relocate(v))
	}
	for _, a := range argv {
		if p, ok := strings.CutPrefix(a, "--config="); ok {
			if err := root.relocateConfigFile(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	workDir := root.host(img.config.WorkingDir)
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		t.Fatal(err)
	}

	p := startProcess(t, argv, environ, workDir)
	base := fmt.Sprintf("http://127.0.0.1:%d", probePort(t, c, c.StartupProbe))
	p.waitOK(t, base+c.StartupProbe.HTTPGet.Path)
	p.waitOK(t, base+c.ReadinessProbe.HTTPGet.Path)

	body := p.get(t, &http.Client{Transport: bearer{bootClientToken}}, base+"/"+bootRepo+"/resolve/main/"+bootFile)
	if body != bootData {
		t.Errorf("%s through hubproxy = %q, want %q", bootFile, body, bootData)
	}
	adminListen := configValue(t, argv, "admin-listen")
	if v, ok := env["HUBPROXY_ADMIN_LISTEN"]; ok { // the environment wins over the file
		adminListen = root.relocate(v)
	}
	if sock, ok := strings.CutPrefix(adminListen, "unix://"); ok {
		admin := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
		p.get(t, admin, "http://admin/cache/stats")
	}
	p.stop(t)
	// What it logged proves it got what the pod's volumes hold (the
	// shared-store secret: its id), not only that it started.
	for _, want := range cluster.logged {
		if !strings.Contains(p.out.String(), want) {
			t.Errorf("hubproxy never logged %q:\n%s", want, p.out.String())
		}
	}
}

// configValue reads a string key of the (relocated) --config file.
func configValue(t *testing.T, argv []string, key string) string {
	t.Helper()
	for _, a := range argv {
		if p, ok := strings.CutPrefix(a, "--config="); ok {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var cfg map[string]any
			if err := yaml.Unmarshal(b, &cfg); err != nil {
				t.Fatal(err)
			}
			s, _ := cfg[key].(string)
			return s
		}
	}
	return ""
}

// probePort resolves a probe's port (a number or a container port's name).
func probePort(t *testing.T, c *corev1.Container, probe *corev1.Probe) int32 {
	t.Helper()
	if probe == nil || probe.HTTPGet == nil {
		t.Fatal("no httpGet probe")
	}
	if n := probe.HTTPGet.Port.IntValue(); n != 0 {
		return int32(n)
	}
	for _, p := range c.Ports {
		if p.Name == probe.HTTPGet.Port.String() {
			return p.ContainerPort
		}
	}
	t.Fatalf("probe port %q names no container port", probe.HTTPGet.Port.String())
	return 0
}

// process is the booted hubproxy, supervised as every test's child
// process is (internal/child).
type process struct {
	*child.Process
	out *syncBuffer
}

func startProcess(t *testing.T, argv, environ []string, dir string) *process {
	t.Helper()
	p := &process{out: &syncBuffer{}}
	c, err := child.Start(child.Spec{Name: "hubproxy", Path: argv[0], Args: argv[1:], Env: environ, Dir: dir, Output: p.out})
	if err != nil {
		t.Fatalf("starting %q: %v", argv, err)
	}
	p.Process = c
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("hubproxy %q said:\n%s", argv, p.out.String())
		}
	})
	return p
}

// waitOK polls url until it answers 200, failing at once if hubproxy exits
// first (as the chart's pods did, on `hubproxy serve serve`).
func (p *process) waitOK(t *testing.T, url string) {
	t.Helper()
	ok := func(status int) bool { return status == http.StatusOK }
	if err := child.WaitHTTP(context.Background(), p.Process, url, ok); err != nil {
		t.Fatalf("%v:\n%s", err, p.out.String())
	}
}

// get fetches url and wants a 200.
func (p *process) get(t *testing.T, client *http.Client, url string) string {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, b)
	}
	return string(b)
}

// stop sends SIGTERM, as the kubelet does, and wants an orderly exit.
func (p *process) stop(t *testing.T) {
	t.Helper()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.Err(); err != nil {
		t.Errorf("after SIGTERM hubproxy exited with %v, want status 0", err)
	}
}

// bearer sends every request with a caller's token, as hub clients do.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// syncBuffer collects the process's output from two pipes.
type syncBuffer = testutil.SyncBuffer

// tlsFront serves the hub over https with a certificate of its own CA,
// returning its URL and that CA in PEM.
func tlsFront(t *testing.T, hubURL string) (string, string) {
	t.Helper()
	u, err := url.Parse(hubURL)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(u))
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return srv.URL, string(ca)
}

// freePort returns a TCP port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	n, _ := strconv.Atoi(port)
	return n
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
