package cache

import (
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// DefaultMaxMetaBytes bounds .hubproxy/meta (cached API answers, repo
// visibility): callers can vary queries and tokens at will, so without a
// bound those small documents could fill the disk on their own.
const DefaultMaxMetaBytes = 256 << 20

// metaBudget keeps .hubproxy/meta under a byte limit by removing the least
// recently written documents (a cached API answer is only an optimisation,
// or an offline fallback; losing an old one costs one upstream request).
type metaBudget struct {
	dir   string
	limit int64

	mu   sync.Mutex
	used int64 // bytes in dir as last counted plus writes since; guarded by mu
}

func newMetaBudget(dir string, limit int64) *metaBudget {
	m := &metaBudget{dir: dir, limit: limit}
	m.used = m.scan(nil)
	return m
}

// wrote records a write of n bytes and trims the directory when over the
// limit, down to three quarters of it.
func (m *metaBudget) wrote(n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.used += n
	if m.used <= m.limit {
		return
	}
	type doc struct {
		path string
		size int64
		mod  time.Time
	}
	var docs []doc
	m.used = m.scan(func(path string, fi os.FileInfo) {
		docs = append(docs, doc{path, fi.Size(), fi.ModTime()})
	})
	sort.Slice(docs, func(i, j int) bool { return docs[i].mod.Before(docs[j].mod) })
	for _, d := range docs {
		if m.used <= m.limit*3/4 {
			break
		}
		if os.Remove(d.path) == nil {
			m.used -= d.size
		}
	}
}

// scan totals the directory's files, calling each for every one.
func (m *metaBudget) scan(each func(string, os.FileInfo)) int64 {
	var total int64
	ents, _ := os.ReadDir(m.dir)
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		total += fi.Size()
		if each != nil {
			each(filepath.Join(m.dir, e.Name()), fi)
		}
	}
	return total
}
