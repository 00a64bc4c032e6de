package app

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// allowedImports is the package map: which internal packages each may
// import. Dependencies point one way, from the composition root down to the
// pure vocabulary; a package never imports one meant to sit above it, and
// nothing imports the test fake (hubtest) but tests and benchmarks.
var allowedImports = map[string][]string{
	"hub":                   nil,
	"bytesize":              nil,
	"header":                nil,
	"cache/ranges":          nil,
	"metrics":               {"cache"},
	"inproc":                nil,
	"gpu":                   nil,
	"fetch":                 {"hub", "breaker"},
	"breaker":               nil,
	"testutil":              nil,
	"spectest":              nil,
	"apptest":               {"app", "hubtest"},
	"cache":                 {"hub", "cache/ranges"},
	"cachemaint":            {"hub", "cache", "cache/ranges"},
	"dirhub":                {"hub"},
	"hubtest":               {"hub"},
	"resolver":              {"hub", "fetch", "cache"},
	"repofs":                {"hub", "fetch", "cache", "resolver"},
	"repoapi":               {"hub", "fetch", "resolver", "flight"},
	"tensor":                {"hub", "header", "flight", "resolver"},
	"flight":                nil,
	"server":                {"hub", "fetch", "cache", "resolver", "repofs", "repoapi", "tensor", "metrics", "secret"},
	"admin":                 {"hub", "tensor", "gpu", "metrics", "secret", "server"},
	"s3api":                 {"hub", "fetch", "cache", "resolver", "repofs", "repoapi"},
	"sharedstore":           {"secret"},
	"secret":                nil,
	"netlimit":              nil,
	"sharedstore/miniotest": {"child"},
	"child":                 nil,
	"sharedfill":            {"hub", "sharedstore", "breaker", "flight"},
	"app":                   {"repoapi", "hub", "fetch", "cache", "resolver", "repofs", "tensor", "gpu", "metrics", "server", "s3api", "admin", "dirhub", "inproc", "sharedstore", "sharedfill"},
}

// TestPackagesImportOnlyDownward reads every internal package's imports
// (test files excluded) and checks them against allowedImports; a package
// missing from the map fails too, so a new one gets a place in it.
func TestPackagesImportOnlyDownward(t *testing.T) {
	const prefix = "github.com/hubproxy/hubproxy/internal/"
	root := ".."
	err := filepath.WalkDir(root, func(dir string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || strings.Contains(dir, "testdata") {
			return err
		}
		pkgs, err := parser.ParseDir(token.NewFileSet(), dir, func(fi os.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.ImportsOnly)
		if err != nil || len(pkgs) == 0 {
			return err
		}
		name := filepath.ToSlash(strings.TrimPrefix(dir, root+string(filepath.Separator)))
		allowed, known := allowedImports[name]
		if !known {
			t.Errorf("internal/%s is not in the package map (allowedImports)", name)
			return nil
		}
		for _, p := range pkgs {
			for _, f := range p.Files {
				for _, imp := range f.Imports {
					path := strings.Trim(imp.Path.Value, `"`)
					dep, ok := strings.CutPrefix(path, prefix)
					if ok && !slices.Contains(allowed, dep) {
						t.Errorf("internal/%s imports internal/%s, which the package map does not allow", name, dep)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
