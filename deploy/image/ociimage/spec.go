// Package ociimage builds hubproxy's container image without a Docker daemon:
// the static binary on an empty base, plus the few files the distroless base
// of the Dockerfile provides, written as an OCI image layout that any OCI tool
// can push or load. The Dockerfile stays the reference; a test checks that the
// two agree on how the container starts.
package ociimage

// NonrootUID is distroless's "nonroot" user and group, which hubproxy runs as.
const NonrootUID = 65532

// The runtime contract of the image: how the container starts and what it
// sees. It must match the Dockerfile's final stage (ENTRYPOINT, CMD, USER,
// ENV, EXPOSE); ociimage's tests parse the Dockerfile to hold it to that.
var (
	// Entrypoint is the binary alone, so `docker run IMAGE ls ...` and a pod's
	// args name a subcommand instead of being appended to "serve".
	Entrypoint = []string{"/hubproxy"}
	// Cmd is the default subcommand, replaced by a pod's args.
	Cmd = []string{"serve"}
	// User is uid:gid; numeric, so runAsNonRoot can verify it without
	// reading /etc/passwd.
	User = "65532:65532"
	// WorkingDir is the nonroot user's home, as on distroless:nonroot.
	WorkingDir = "/home/nonroot"
	// ExposedPort is config listen's default port.
	ExposedPort = "8080/tcp"
	// DockerfileEnv is what the Dockerfile sets with ENV.
	DockerfileEnv = []string{"HUBPROXY_CACHE_DIR=/var/cache/hubproxy"}
	// BaseEnv is what distroless's image configuration sets and the
	// Dockerfile inherits.
	BaseEnv = []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"SSL_CERT_FILE=" + CACertsPath,
	}
)

// CACertsPath is where the CA bundle lives, as on Debian and distroless.
const CACertsPath = "/etc/ssl/certs/ca-certificates.crt"

// BinaryPath is where the static binary is installed; Entrypoint names it.
const BinaryPath = "/hubproxy"

// OwnedDirs are the directories the nonroot user must be able to write with
// no shell in the image to create them: the cache root (HUBPROXY_CACHE_DIR)
// and the admin socket's directory (admin-listen's default).
var OwnedDirs = []string{"/var/cache/hubproxy", "/run/hubproxy"}

// Env is the image's whole environment: the base's, then the Dockerfile's.
func Env() []string {
	return append(append([]string(nil), BaseEnv...), DockerfileEnv...)
}
