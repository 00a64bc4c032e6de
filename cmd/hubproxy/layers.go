package main

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// The environment variables viper maps the keys to: HUBPROXY_CACHE_DIR for
// cache-dir.
const envPrefix = "HUBPROXY"

var envKeyReplacer = strings.NewReplacer("-", "_")

// layers is one viper over the sources of the configuration keys: the flags
// of a command, the HUBPROXY_* variables and the config file, each winning
// over the next. Viper picks a key's value; the strict checks stay here
// (unknown file keys) and in assign (every value's type).
type layers struct {
	v    *viper.Viper
	fs   *pflag.FlagSet
	path string // the config file read, "" for none
}

// newLayers binds the flags of fs that are configuration keys (and
// --config), the variables, and reads the config file named by --config or
// HUBPROXY_CONFIG, refusing keys in it that are not configuration keys, so a
// typo never silently leaves a default.
func newLayers(fs *pflag.FlagSet) (layers, error) {
	v := viper.New()
	v.SetEnvPrefix(envPrefix)
	v.SetEnvKeyReplacer(envKeyReplacer)
	// A variable set to "" is a value: HUBPROXY_ADMIN_LISTEN= turns the
	// admin API off, HUBPROXY_CONFIG= reads no file.
	v.AllowEmptyEnv(true)
	v.AutomaticEnv()
	// Only the flags that are keys: a command's own flags (--json, --fix)
	// are not configuration, and a subcommand declares only the keys it
	// reads (cache-dir), the rest coming from the variables and the file.
	names := []string{"config"}
	for _, k := range configKeys() {
		names = append(names, k.name)
	}
	for _, name := range names {
		if f := fs.Lookup(name); f != nil {
			if err := v.BindPFlag(name, f); err != nil {
				return layers{}, err
			}
		}
	}
	// --config, else HUBPROXY_CONFIG: the file cannot name itself.
	l := layers{v: v, fs: fs, path: v.GetString("config")}
	if l.path == "" {
		return l, nil
	}
	v.SetConfigFile(l.path)
	if err := v.ReadInConfig(); err != nil {
		return layers{}, fmt.Errorf("reading config %s: %w", l.path, err)
	}
	return l, l.refuseUnknownKeys()
}

// refuseUnknownKeys is the error naming the file's top-level keys that are
// not configuration keys (with the key each was probably meant to be), or
// nil. A nested one (cache: {max: 1}) is named by its top-level key.
func (l layers) refuseUnknownKeys() error {
	known := map[string]bool{}
	for _, k := range configKeys() {
		known[k.name] = true
	}
	seen := map[string]bool{}
	var unknown []string
	for _, key := range l.v.AllKeys() { // flags' and the file's, flattened
		top, _, _ := strings.Cut(key, ".")
		if known[top] || seen[top] || !l.v.InConfig(key) {
			continue
		}
		seen[top] = true
		hint := ""
		if s := closestKey(top, known); s != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", s)
		}
		unknown = append(unknown, fmt.Sprintf("%q%s", top, hint))
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return fmt.Errorf("config %s: unknown keys %s; `hubproxy config --help` lists the keys", l.path, strings.Join(unknown, ", "))
}

// closestKey suggests the known key a misspelt one was meant to be: the same
// letters with '_' or '.' for '-', or the nearest by edit distance.
func closestKey(key string, known map[string]bool) string {
	norm := strings.NewReplacer("_", "-", ".", "-", " ", "-").Replace(strings.ToLower(key))
	if known[norm] {
		return norm
	}
	best, bestD := "", 4 // suggest only close matches
	for k := range known {
		if d := editDistance(norm, k); d < bestD || d == bestD && k < best {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of two short strings.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// lookup is a key's raw value as viper layers it (a flag's or variable's
// text, or the YAML value) and where it came from; ok is false when no
// layer sets the key, and app.Defaults' value stands.
func (l layers) lookup(k configKey) (any, source, bool) {
	if !l.v.IsSet(k.name) {
		return nil, source{}, false
	}
	return l.v.Get(k.name), l.sourceOf(k.name), true
}

// sourceOf names the layer viper took a set key's value from. Viper does
// not say which, so the layers are asked in its order (a changed flag, a
// variable, the file); TestPrecedenceEveryKind checks that the value and
// the name agree.
func (l layers) sourceOf(key string) source {
	if f := l.fs.Lookup(key); f != nil && f.Changed {
		return source{kind: "flag", name: "--" + key}
	}
	if _, ok := os.LookupEnv(envName(key)); ok {
		return source{kind: "env", name: envName(key)}
	}
	return source{kind: "file", name: l.path}
}
