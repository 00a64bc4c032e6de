package sharedstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/sharedstore"
	"github.com/hubproxy/hubproxy/internal/sharedstore/miniotest"
)

// backends opens the same suite on a file:// store and on a real S3 server.
func backends(t *testing.T) map[string]func(t *testing.T) *sharedstore.Store {
	return map[string]func(t *testing.T) *sharedstore.Store{
		"file": func(t *testing.T) *sharedstore.Store {
			s, err := sharedstore.Open(context.Background(), "file://"+t.TempDir(), sharedstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"s3": func(t *testing.T) *sharedstore.Store {
			m := miniotest.Start(t)
			m.SetEnv(t)
			s, err := sharedstore.Open(context.Background(), m.URL("some/prefix"), sharedstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
}

func TestConformance(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			ctx := context.Background()
			t.Run("CreateOnce", func(t *testing.T) {
				if err := s.Create(ctx, "a/b/c", []byte("first")); err != nil {
					t.Fatal(err)
				}
				if err := s.Create(ctx, "a/b/c", []byte("second")); !errors.Is(err, sharedstore.ErrExists) {
					t.Fatalf("second create: %v, want ErrExists", err)
				}
				if got := readAll(t, s, "a/b/c", 0, -1); got != "first" {
					t.Fatalf("read %q after a refused create, want the first", got)
				}
			})
			t.Run("Ranges", func(t *testing.T) {
				data := bytes.Repeat([]byte("0123456789"), 1000)
				if err := s.Create(ctx, "r/obj", data); err != nil {
					t.Fatal(err)
				}
				for _, c := range []struct{ off, n int64 }{{0, 10}, {5, 1}, {9990, 10}, {1234, 5000}, {100, -1}, {0, -1}} {
					body, size, err := s.ReadRange(ctx, "r/obj", c.off, c.n)
					if err != nil {
						t.Fatalf("%+v: %v", c, err)
					}
					got, err := io.ReadAll(body)
					body.Close()
					end := int64(len(data))
					if c.n >= 0 {
						end = c.off + c.n
					}
					if err != nil || size != int64(len(data)) || !bytes.Equal(got, data[c.off:end]) {
						t.Fatalf("%+v: size %d err %v, bytes match %v", c, size, err, bytes.Equal(got, data[c.off:end]))
					}
				}
				for _, c := range []struct{ off, n int64 }{{9999, 2}, {10000, 1}, {20000, 5}} {
					if _, _, err := s.ReadRange(ctx, "r/obj", c.off, c.n); !errors.Is(err, sharedstore.ErrShort) {
						t.Fatalf("read %+v past the end: %v, want ErrShort", c, err)
					}
				}
			})
			t.Run("Missing", func(t *testing.T) {
				if _, _, err := s.ReadRange(ctx, "no/such", 0, 4); !errors.Is(err, sharedstore.ErrNotFound) {
					t.Fatalf("ReadRange: %v", err)
				}
				if _, err := s.Stat(ctx, "no/such"); !errors.Is(err, sharedstore.ErrNotFound) {
					t.Fatalf("Stat: %v", err)
				}
				if err := s.Delete(ctx, "no/such"); err != nil {
					t.Fatalf("Delete of nothing: %v", err)
				}
			})
			t.Run("PutStatDelete", func(t *testing.T) {
				if err := s.Put(ctx, "p/x", []byte("one")); err != nil {
					t.Fatal(err)
				}
				if err := s.Put(ctx, "p/x", []byte("three")); err != nil {
					t.Fatal(err)
				}
				o, err := s.Stat(ctx, "p/x")
				if err != nil || o.Size != 5 || o.Key != "p/x" || time.Since(o.ModTime) > time.Hour {
					t.Fatalf("Stat: %+v %v", o, err)
				}
				if err := s.Delete(ctx, "p/x"); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Stat(ctx, "p/x"); !errors.Is(err, sharedstore.ErrNotFound) {
					t.Fatalf("Stat after delete: %v", err)
				}
				if err := s.Create(ctx, "p/x", []byte("again")); err != nil {
					t.Fatalf("create after delete: %v", err)
				}
			})
			t.Run("List", func(t *testing.T) {
				for _, k := range []string{"l/1/a", "l/1/b", "l/12/c", "l/2/d", "lx"} {
					if err := s.Put(ctx, k, []byte(k)); err != nil {
						t.Fatal(err)
					}
				}
				for prefix, want := range map[string][]string{
					"l/1/": {"l/1/a", "l/1/b"},
					"l/1":  {"l/1/a", "l/1/b", "l/12/c"},
					"l/":   {"l/1/a", "l/1/b", "l/12/c", "l/2/d"},
				} {
					var got []string
					err := s.List(ctx, prefix, func(o sharedstore.Object) error {
						if o.Size != int64(len(o.Key)) {
							t.Errorf("%s: size %d", o.Key, o.Size)
						}
						got = append(got, o.Key)
						return nil
					})
					slices.Sort(got)
					if err != nil || !slices.Equal(got, want) {
						t.Errorf("List(%q) = %v, %v; want %v", prefix, got, err, want)
					}
				}
				stop := errors.New("stop")
				if err := s.List(ctx, "l/", func(sharedstore.Object) error { return stop }); !errors.Is(err, stop) {
					t.Errorf("List returns fn's error: %v", err)
				}
			})
			t.Run("CreateRace", func(t *testing.T) {
				// Exactly one of many concurrent creates wins: the
				// property chunk claims rest on.
				var wg sync.WaitGroup
				var mu sync.Mutex
				var won []int
				for i := range 8 {
					wg.Go(func() {
						err := s.Create(ctx, "race/k", []byte(fmt.Sprint(i)))
						switch {
						case err == nil:
							mu.Lock()
							won = append(won, i)
							mu.Unlock()
						case !errors.Is(err, sharedstore.ErrExists):
							t.Error(err)
						}
					})
				}
				wg.Wait()
				if len(won) != 1 {
					t.Fatalf("%d creates won: %v", len(won), won)
				}
				if got := readAll(t, s, "race/k", 0, -1); got != fmt.Sprint(won[0]) {
					t.Fatalf("object holds %q, the winner wrote %d", got, won[0])
				}
			})
			t.Run("BadKeys", func(t *testing.T) {
				for _, k := range []string{"", "/abs", "a/../b", "a//b", "./a"} {
					if err := s.Put(ctx, k, nil); err == nil {
						t.Errorf("Put(%q) accepted", k)
					}
				}
			})
		})
	}
}

func readAll(t *testing.T, s *sharedstore.Store, key string, off, n int64) string {
	t.Helper()
	body, _, err := s.ReadRange(context.Background(), key, off, n)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	b, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestObserve(t *testing.T) {
	type call struct {
		op    sharedstore.Op
		bytes int64
		err   bool
	}
	var mu sync.Mutex
	var calls []call
	s, err := sharedstore.Open(context.Background(), "file://"+t.TempDir(), sharedstore.Options{
		Observe: func(op sharedstore.Op, n int64, err error) {
			mu.Lock()
			calls = append(calls, call{op, n, err != nil && !errors.Is(err, sharedstore.ErrNotFound) && !errors.Is(err, sharedstore.ErrExists)})
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	calls = nil // Open's probe
	mu.Unlock()
	ctx := context.Background()
	s.Create(ctx, "k", []byte("12345"))
	s.Create(ctx, "k", []byte("12345"))
	readAll(t, s, "k", 1, 3)
	s.Stat(ctx, "nope")
	want := []call{{sharedstore.OpCreate, 5, false}, {sharedstore.OpCreate, 0, false}, {sharedstore.OpGet, 3, false}, {sharedstore.OpStat, 0, false}}
	if !slices.Equal(calls, want) {
		t.Fatalf("observed %+v, want %+v", calls, want)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ce *sharedstore.ConfigError
	// A directory that is not there is the operator's mistake.
	_, err := sharedstore.Open(ctx, "file://"+filepath.Join(t.TempDir(), "missing"), sharedstore.Options{})
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing dir: %v", err)
	}
	notDir := filepath.Join(t.TempDir(), "f")
	os.WriteFile(notDir, nil, 0o644)
	if _, err := sharedstore.Open(ctx, "file://"+notDir, sharedstore.Options{}); !errors.As(err, &ce) {
		t.Errorf("a file, not a dir: %v", err)
	}

	m := miniotest.Start(t)
	m.SetEnv(t)
	// No such bucket: a clear error naming it.
	_, err = sharedstore.Open(ctx, strings.Replace(m.URL(""), "s3://"+miniotest.Bucket, "s3://no-such-bucket", 1), sharedstore.Options{})
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), `"no-such-bucket" does not exist`) {
		t.Errorf("missing bucket: %v", err)
	}
	// Refused credentials.
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-key")
	if _, err := sharedstore.Open(ctx, m.URL(""), sharedstore.Options{}); !errors.As(err, &ce) || !strings.Contains(err.Error(), "denied") {
		t.Errorf("wrong secret: %v", err)
	}
	m.SetEnv(t)

	// A store that is merely down: an error, but not a ConfigError, and a
	// Store that works once the server is back.
	m.Stop()
	s, err := sharedstore.Open(ctx, m.URL("p"), sharedstore.Options{})
	if err == nil || errors.As(err, &ce) || s == nil {
		t.Fatalf("store down at start: %v (store %v), want a plain error and a store", err, s)
	}
	m.Restart(t)
	if err := s.Put(ctx, "after", []byte("x")); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}

func TestOpenNoServer(t *testing.T) {
	// Nothing listens there: unreachable, not misconfigured.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "x")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "y")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := sharedstore.Open(ctx, "s3://b?endpoint=http://"+addr+"&use_path_style=true", sharedstore.Options{})
	var ce *sharedstore.ConfigError
	if err == nil || errors.As(err, &ce) || s == nil {
		t.Fatalf("got %v, %v", s, err)
	}
}

// A read-only Open (cache store ls, du) writes nothing, so credentials that
// may only list and read still work; a plain Open probes with a create.
func TestReadOnlyOpenWritesNothing(t *testing.T) {
	for _, readOnly := range []bool{false, true} {
		var mu sync.Mutex
		var writes []sharedstore.Op
		_, err := sharedstore.Open(context.Background(), "file://"+t.TempDir(), sharedstore.Options{
			ReadOnly: readOnly,
			Observe: func(op sharedstore.Op, _ int64, _ error) {
				if op == sharedstore.OpCreate || op == sharedstore.OpPut || op == sharedstore.OpDelete {
					mu.Lock()
					writes = append(writes, op)
					mu.Unlock()
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if readOnly && len(writes) != 0 {
			t.Errorf("read-only Open wrote: %v", writes)
		}
		if !readOnly && len(writes) == 0 {
			t.Error("Open wrote nothing: the probe no longer goes through Observe, so this test proves nothing")
		}
	}
}
