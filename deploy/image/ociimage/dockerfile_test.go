package ociimage

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// runtimeStage is what a Dockerfile's final stage says about how the
// container starts and what it may write.
type runtimeStage struct {
	from             string
	entrypoint, cmd  []string
	user             string
	env              map[string]string
	expose           []string
	chownedDirectory map[string]string // COPY --chown destination → owner
}

// parseFinalStage reads the last stage of a Dockerfile: FROM, ENTRYPOINT and
// CMD (exec form only: a shell form would need a shell the image lacks),
// USER, ENV, EXPOSE and the destinations of COPY --chown.
func parseFinalStage(path string) (runtimeStage, error) {
	f, err := os.Open(path)
	if err != nil {
		return runtimeStage{}, err
	}
	defer f.Close()
	var st runtimeStage
	var logical strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if logical.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			logical.WriteString(cont + " ")
			continue
		}
		logical.WriteString(line)
		instr, args, _ := strings.Cut(logical.String(), " ")
		logical.Reset()
		args = strings.TrimSpace(args)
		switch strings.ToUpper(instr) {
		case "FROM":
			st = runtimeStage{from: strings.Fields(args)[len(strings.Fields(args))-1], env: map[string]string{}, chownedDirectory: map[string]string{}}
			if fs := strings.Fields(args); len(fs) >= 3 && strings.EqualFold(fs[len(fs)-2], "AS") {
				st.from = fs[len(fs)-3]
			}
		case "ENTRYPOINT", "CMD":
			var argv []string
			if err := json.Unmarshal([]byte(args), &argv); err != nil {
				return st, fmt.Errorf("%s %s: not the exec (JSON) form: %v", instr, args, err)
			}
			if strings.EqualFold(instr, "ENTRYPOINT") {
				st.entrypoint = argv
			} else {
				st.cmd = argv
			}
		case "USER":
			st.user = args
		case "ENV":
			if err := parseEnv(args, st.env); err != nil {
				return st, err
			}
		case "EXPOSE":
			for _, p := range strings.Fields(args) {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				st.expose = append(st.expose, p)
			}
		case "COPY":
			fs := strings.Fields(args)
			for _, a := range fs {
				if owner, ok := strings.CutPrefix(a, "--chown="); ok {
					st.chownedDirectory[fs[len(fs)-1]] = owner
				}
			}
		}
	}
	return st, sc.Err()
}

// parseEnv reads `K=V K2="v w"` or the legacy `K V`.
func parseEnv(args string, into map[string]string) error {
	if k, v, ok := strings.Cut(args, " "); ok && !strings.Contains(k, "=") {
		into[k] = strings.TrimSpace(v)
		return nil
	}
	for rest := args; rest != ""; rest = strings.TrimSpace(rest) {
		k, after, ok := strings.Cut(rest, "=")
		if !ok {
			return fmt.Errorf("ENV %s: want KEY=VALUE", args)
		}
		var v string
		if strings.HasPrefix(after, `"`) {
			end := strings.Index(after[1:], `"`) + 2
			uq, err := strconv.Unquote(after[:end])
			if err != nil {
				return fmt.Errorf("ENV %s: %v", args, err)
			}
			v, rest = uq, after[end:]
		} else {
			v, rest, _ = strings.Cut(after, " ")
		}
		into[k] = v
	}
	return nil
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// TestImageAgreesWithDockerfile builds an image and holds its configuration
// to the Dockerfile's final stage: a pod's args replace CMD and keep
// ENTRYPOINT, so the chart, the Dockerfile and this builder must agree on
// both, or `docker build` and `make image` give images that start differently.
func TestImageAgreesWithDockerfile(t *testing.T) {
	img, _ := buildTestImage(t)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	files, err := Files(img)
	if err != nil {
		t.Fatal(err)
	}
	st, err := parseFinalStage("../../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	// BaseEnv, WorkingDir and the accounts describe this base; another one
	// needs them checked again.
	if st.from != "gcr.io/distroless/static-debian12:nonroot" {
		t.Errorf("Dockerfile runs on %s; BaseEnv, WorkingDir and rootfs() describe distroless/static-debian12:nonroot", st.from)
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, st.entrypoint) || !slices.Equal(c.Cmd, st.cmd) {
		t.Errorf("image starts %q + %q; Dockerfile says ENTRYPOINT %q CMD %q", c.Entrypoint, c.Cmd, st.entrypoint, st.cmd)
	}
	if c.User != st.user {
		t.Errorf("image USER %q, Dockerfile %q", c.User, st.user)
	}
	want := envMap(BaseEnv)
	maps.Copy(want, st.env)
	if got := envMap(c.Env); !maps.Equal(got, want) {
		t.Errorf("image env %v; Dockerfile ENV over the base's gives %v", got, want)
	}
	if got := slices.Sorted(maps.Keys(c.ExposedPorts)); !slices.Equal(got, st.expose) {
		t.Errorf("image exposes %v, Dockerfile %v", got, st.expose)
	}
	if len(st.chownedDirectory) == 0 {
		t.Error("Dockerfile gives the nonroot user no directory")
	}
	for dir, owner := range st.chownedDirectory {
		f, ok := files[dir]
		if !ok || f.Data != nil {
			t.Errorf("Dockerfile makes %s (owner %s); the image has no such directory", dir, owner)
			continue
		}
		if got := fmt.Sprintf("%d:%d", f.Header.Uid, f.Header.Gid); got != owner {
			t.Errorf("%s is owned by %s in the image, %s in the Dockerfile", dir, got, owner)
		}
	}
}

// TestCUDAImageStartsLikeTheStaticOne: the chart runs either image with the
// same args, so Dockerfile.cuda must start the same way and keep the same
// cache directory and writable paths.
func TestCUDAImageStartsLikeTheStaticOne(t *testing.T) {
	static, err := parseFinalStage("../../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	cuda, err := parseFinalStage("../../../Dockerfile.cuda")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cuda.entrypoint, static.entrypoint) || !slices.Equal(cuda.cmd, static.cmd) {
		t.Errorf("Dockerfile.cuda starts %q + %q, Dockerfile %q + %q", cuda.entrypoint, cuda.cmd, static.entrypoint, static.cmd)
	}
	if cuda.user != static.user || !slices.Equal(cuda.expose, static.expose) || !maps.Equal(cuda.chownedDirectory, static.chownedDirectory) {
		t.Errorf("Dockerfile.cuda USER %q EXPOSE %v owned %v; Dockerfile %q %v %v",
			cuda.user, cuda.expose, cuda.chownedDirectory, static.user, static.expose, static.chownedDirectory)
	}
	for k, v := range static.env {
		if cuda.env[k] != v {
			t.Errorf("Dockerfile.cuda ENV %s=%q, Dockerfile %q", k, cuda.env[k], v)
		}
	}
}

// TestParseFinalStage checks the parser on the forms it must not misread.
func TestParseFinalStage(t *testing.T) {
	path := t.TempDir() + "/Dockerfile"
	df := `FROM golang AS build
ENTRYPOINT ["/wrong"]
# comment
FROM scratch
ENV A=1 B="two words" \
    C=3
ENV LEGACY some value
COPY --from=build --chown=1:2 /x /y
USER 7:7
EXPOSE 9000 53/udp
ENTRYPOINT ["/bin"]
CMD ["a", "b"]
`
	if err := os.WriteFile(path, []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := parseFinalStage(path)
	if err != nil {
		t.Fatal(err)
	}
	wantEnv := map[string]string{"A": "1", "B": "two words", "C": "3", "LEGACY": "some value"}
	if st.from != "scratch" || !slices.Equal(st.entrypoint, []string{"/bin"}) || !slices.Equal(st.cmd, []string{"a", "b"}) ||
		st.user != "7:7" || !maps.Equal(st.env, wantEnv) || !slices.Equal(st.expose, []string{"9000/tcp", "53/udp"}) ||
		st.chownedDirectory["/y"] != "1:2" {
		t.Errorf("parsed %+v", st)
	}
	if err := os.WriteFile(path, []byte("FROM scratch\nENTRYPOINT /hubproxy serve\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := parseFinalStage(path); err == nil {
		t.Error("shell-form ENTRYPOINT accepted; it needs /bin/sh, which the image lacks")
	}
}
