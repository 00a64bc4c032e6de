package app

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hubproxy/hubproxy/internal/cache"
	"github.com/hubproxy/hubproxy/internal/hub"
	"github.com/hubproxy/hubproxy/internal/metrics"
	"github.com/hubproxy/hubproxy/internal/sharedfill"
	"github.com/hubproxy/hubproxy/internal/sharedstore"
)

// shared is the cluster tier: the shared store and the sharing of fills
// through it. A nil *shared (no shared-store) gives nil hooks.
type shared struct {
	sharer *sharedfill.Sharer
}

// sharedOpenTimeout bounds checking the store at start.
const sharedOpenTimeout = 30 * time.Second

// openShared opens cfg.SharedStore, if set. A store that cannot work as
// configured (a malformed URL, no such bucket or directory, refused
// credentials, no conditional create) stops the start with an error naming
// it; one that is merely not answering is logged, and this node serves from
// upstream until it answers.
func openShared(cfg Config, reg prometheus.Registerer, log *slog.Logger) (*shared, error) {
	if cfg.SharedStore == "" {
		return nil, nil
	}
	secret, err := sharedSecret(cfg)
	if err != nil {
		return nil, err
	}
	log = log.With("component", "sharedstore")
	s := &shared{}
	m := metrics.RegisterSharedStore(reg, func() bool { return s.sharer.Health().Up })
	ctx, cancel := context.WithTimeout(context.Background(), sharedOpenTimeout)
	defer cancel()
	store, openErr := sharedstore.Open(ctx, cfg.SharedStore, sharedstore.Options{
		Observe: func(op sharedstore.Op, n int64, err error) { m.ObserveOp(string(op), storeResult(err), n) },
		Logger:  log,
	})
	var ce *sharedstore.ConfigError
	if errors.As(openErr, &ce) {
		return nil, fmt.Errorf("shared-store: %w", openErr)
	}
	chunk := cmp.Or(cfg.ChunkSize, Defaults().ChunkSize)
	s.sharer, err = sharedfill.New(store, sharedfill.Options{
		Secret:        secret,
		ChunkSize:     chunk,
		Lease:         cfg.SharedStoreLease,
		FallbackAfter: cfg.SharedStoreFallbackAfter,
		// One flight per upstream request the cache may make, and as
		// many again for chunks a misaligned request also touches.
		MaxFlights: 2 * cmp.Or(cfg.UpstreamConns, Defaults().UpstreamConns),
		OnClaim:    m.ObserveClaim,
		OnReject:   m.ObserveReject,
		OnVerified: m.ObserveChunkLookup,
		Logger:     log,
	})
	if err != nil {
		return nil, fmt.Errorf("shared-store: %w", err)
	}
	if openErr != nil {
		log.Warn("shared store not answering at start; serving from upstream until it does", "err", openErr)
		s.sharer.Probe(ctx) // records it as down, for /readyz and hubproxy_store_up
	} else {
		// The secret's id, so that nodes with differing secrets (which
		// reject each other's chunks) can be told apart from their logs.
		log.Info("sharing chunks with the cluster through the shared store", "store", store.String(), "chunk_size", chunk,
			"secret_id", s.sharer.SecretID())
	}
	return s, nil
}

// makeSecret is how the README and errors tell users to make a secret.
const makeSecret = "head -c 32 /dev/urandom | base64 > store-secret"

// sharedSecret is the cluster's shared-store secret, from
// shared-store-secret-file or shared-store-secret; one is required, since
// without it anyone who can write the store could make every node serve
// bytes of their choosing. Surrounding whitespace is not part of it, so a
// trailing newline (echo, an editor, a Secret made from a file) cannot make
// two nodes' secrets differ.
func sharedSecret(cfg Config) ([]byte, error) {
	var secret []byte
	switch {
	case cfg.SharedStoreSecretFile != "" && cfg.SharedStoreSecret != "":
		return nil, errors.New("shared-store-secret-file and shared-store-secret are both set; give one")
	case cfg.SharedStoreSecretFile != "":
		b, err := os.ReadFile(cfg.SharedStoreSecretFile)
		if err != nil {
			return nil, fmt.Errorf("shared-store-secret-file: %w", err)
		}
		secret = bytes.TrimSpace(b)
	case cfg.SharedStoreSecret != "":
		secret = bytes.TrimSpace([]byte(cfg.SharedStoreSecret))
	default:
		return nil, fmt.Errorf("shared-store needs a secret that every node of the cluster shares, to seal the chunks they put in the store "+
			"(else anyone who can write the store could make every node serve bytes of their choosing): create one with `%s` "+
			"and give it to every node as shared-store-secret-file (HUBPROXY_SHARED_STORE_SECRET_FILE); in Kubernetes, mount it from a Secret", makeSecret)
	}
	if len(secret) < sharedfill.MinSecretLen {
		return nil, fmt.Errorf("shared-store secret: %d bytes, want at least %d (not counting surrounding whitespace); create one with `%s`",
			len(secret), sharedfill.MinSecretLen, makeSecret)
	}
	return secret, nil
}

// storeResult is a store call's result label.
func storeResult(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, sharedstore.ErrNotFound), errors.Is(err, sharedstore.ErrShort):
		return "not_found"
	case errors.Is(err, sharedstore.ErrExists):
		return "exists"
	}
	return "error"
}

// Close stops sharing (releasing chunk claims held).
func (s *shared) Close() error { return s.sharer.Close() }

// forget is the cache's verification hook: a file that failed may have come
// from the store, so its chunks there go.
func (s *shared) forget(_ hub.Repo, etag string) {
	if s != nil {
		s.sharer.Discard(etag)
	}
}

// share is what repofs wraps fills with; nil without a store.
func (s *shared) share() func(etag string, size int64, up cache.Origin) cache.Origin {
	if s == nil {
		return nil
	}
	return func(etag string, size int64, up cache.Origin) cache.Origin { return s.sharer.Origin(etag, size, up) }
}

// health is what /readyz reports of the store; nil without one.
func (s *shared) health() storeHealth {
	if s == nil {
		return nil
	}
	return s.sharer
}

// storeHealth is what readiness needs of the shared tier.
type storeHealth interface {
	Health() sharedfill.Health
	Probe(ctx context.Context) error
}
