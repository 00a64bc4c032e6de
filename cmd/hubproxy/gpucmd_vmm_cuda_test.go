//go:build cuda && cgo && linux

package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildVMMCheck builds a cuda hubproxy (vmmcheck re-executes itself, so
// the test binary cannot stand in for it) and the C fake driver.
func buildVMMCheck(t *testing.T) (bin, lib string) {
	t.Helper()
	tmp := t.TempDir()
	bin = filepath.Join(tmp, "hubproxy-cuda")
	build := exec.Command("go", "build", "-tags", "cuda", "-o", bin, ".")
	build.Env = append(build.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags cuda: %v\n%s", err, out)
	}
	lib = filepath.Join(tmp, "libfakecuda.so")
	if out, err := exec.Command("gcc", "-shared", "-fPIC", "-O2", "-pthread", "-o", lib, "../../internal/gpu/testdata/fakecuda/fakecuda.c").CombinedOutput(); err != nil {
		t.Fatalf("building the fake driver: %v\n%s", err, out)
	}
	return bin, lib
}

// runVMMCheckProc runs gpu vmmcheck and parses its facts by name.
func runVMMCheckProc(t *testing.T, bin, lib string, env ...string) (map[string]vmmFact, []string, error) {
	t.Helper()
	cmd := exec.Command(bin, "gpu", "vmmcheck", "--driver-path", lib, "--size", "3MiB", "--step-timeout", "2m")
	cmd.Env = append(cmd.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	facts := map[string]vmmFact{}
	var order []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var f vmmFact
		if jerr := json.Unmarshal([]byte(line), &f); jerr != nil {
			t.Fatalf("output line %q is not a fact: %v\nstderr:\n%s", line, jerr, stderr.String())
		}
		facts[f.Fact] = f
		order = append(order, f.Fact)
	}
	if err != nil {
		t.Logf("stderr:\n%s", stderr.String())
	}
	return facts, order, err
}

var vmmFactNames = []string{"granularity", "unimported_fd_memory", "import_pattern_1", "survives_exporter_unmap_release",
	"import_pattern_2", "survives_exporter_ctx_reset", "survives_exporter_sigkill", "importer_exit"}

// TestGPUVMMCheckAgainstTheFakeDriver: three processes (this check, an
// importer and a killed exporter) over the fake, whose VMM memory lives in
// a memfd shared across them: every fact is reported, and passes.
func TestGPUVMMCheckAgainstTheFakeDriver(t *testing.T) {
	bin, lib := buildVMMCheck(t)
	facts, order, err := runVMMCheckProc(t, bin, lib)
	if err != nil {
		t.Fatalf("gpu vmmcheck: %v, facts %v", err, facts)
	}
	if strings.Join(order, " ") != strings.Join(vmmFactNames, " ") {
		t.Fatalf("facts %v, want %v", order, vmmFactNames)
	}
	for _, f := range facts {
		if !f.Pass {
			t.Errorf("fact %s failed: %s", f.Fact, f.Error)
		}
	}
	g := facts["granularity"].Values
	if g["minimum"] != float64(2<<20) || g["recommended"] != float64(4<<20) {
		t.Errorf("granularity %v, want the fake's 2 MiB minimum and 4 MiB recommended", g)
	}
	// 3 MiB rounds up to two 2 MiB pages; the fake holds the memory of a
	// released allocation while its descriptor is open, as the driver does.
	u := facts["unimported_fd_memory"].Values
	if u["bytes"] != float64(4<<20) || u["held_while_fd_open"] != true || u["free_fd_closed"] != u["free_before"] {
		t.Errorf("unimported descriptor: %v", u)
	}
}

// TestGPUVMMCheckReportsAFailedImport: an importer whose second import
// fails (FAKECUDA_FAIL, read by each process's fake) fails the facts that
// depend on it, by name, and the check exits non-zero.
func TestGPUVMMCheckReportsAFailedImport(t *testing.T) {
	bin, lib := buildVMMCheck(t)
	facts, order, err := runVMMCheckProc(t, bin, lib, "FAKECUDA_FAIL=cuMemImportFromShareableHandle:1:after:1")
	if err == nil {
		t.Fatal("gpu vmmcheck passed with a failing import")
	}
	if strings.Join(order, " ") != strings.Join(vmmFactNames, " ") {
		t.Fatalf("facts %v, want %v", order, vmmFactNames)
	}
	for _, name := range vmmFactNames {
		want := !strings.HasSuffix(name, "_2") && name != "survives_exporter_ctx_reset" && name != "survives_exporter_sigkill"
		if facts[name].Pass != want {
			t.Errorf("fact %s pass=%v, want %v (%s)", name, facts[name].Pass, want, facts[name].Error)
		}
	}
}
