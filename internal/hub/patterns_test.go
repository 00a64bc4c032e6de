package hub

import (
	"strings"
	"testing"
)

// TestFnmatchAsPython: cases from CPython's Lib/test/test_fnmatch.py
// (test_fnmatch, test_slow_fnmatch, test_range*), whose answers are
// fnmatch.fnmatchcase's, and the "/" cases that made path.Match wrong for
// allow_patterns.
func TestFnmatchAsPython(t *testing.T) {
	for _, tc := range []struct {
		name, pattern string
		want          bool
	}{
		{"abc", "abc", true},
		{"abc", "?*?", true},
		{"abc", "???*", true},
		{"abc", "*???", true},
		{"abc", "???", true},
		{"abc", "*", true},
		{"abc", "ab[cd]", true},
		{"abc", "ab[!de]", true},
		{"abc", "ab[de]", false},
		{"a", "??", false},
		{"a", "b", false},
		{"\\", `[\]`, true},
		{"a", `[!\]`, true},
		{"\\", `[!\]`, false},
		{"foo\nbar", "foo*", true},
		{"foo\nbar\n", "foo*", true},
		{"\nfoo", "foo*", false},
		{"\n", "*", true},
		{"ab[", "ab[", true}, // an unclosed "[" is literal
		{"abc", "ab[", false},
		{"[", "[", true},
		{strings.Repeat("a", 50), "*a*a*a*a*a*a*a*a*a*a", true},
		{strings.Repeat("a", 50) + "b", "*a*a*a*a*a*a*a*a*a*a", false},
		{"b", "[a-c]", true},
		{"d", "[a-c]", false},
		{"d", "[!a-c]", true},
		{"b", "[!a-c]", false},
		{"a", "[z-a]", false}, // a reversed range is empty
		{"z", "[z-a]", false},
		{"-", "[z-a]", false},
		{"a", "[!z-a]", true},
		{"-", "[a-]", true},
		{"a", "[a-]", true},
		{"-", "[-b]", true},
		{"]", "[]]", true},
		{"-", "[]-]", true},
		{"]", "[!]]", false},
		{"x", "[!]]", true},
		{"-", "[a-c-e]", true},
		{"e", "[a-c-e]", true},
		{"d", "[a-c-e]", false},
		{"é", "?", true},
		{"é", "[é]", true},
		// "*" and "?" cross "/": unlike path.Match.
		{"original/params.json", "original/*", true},
		{"original/sub/consolidated.00.pth", "original/*", true},
		{"tok/tokenizer.json", "*.json", true},
		{"a/b", "a?b", true},
		{"original.json", "original/*", false},
		{"Config.json", "config.json", false}, // case-sensitive, as on POSIX
	} {
		if got := Fnmatch(tc.name, tc.pattern); got != tc.want {
			t.Errorf("Fnmatch(%q, %q) = %v, want %v", tc.name, tc.pattern, got, tc.want)
		}
	}
}

// TestSelectFileAsHuggingFaceHub: include and exclude as
// filter_repo_objects applies allow_patterns and ignore_patterns, with a
// trailing "/" meaning the folder's whole content.
func TestSelectFileAsHuggingFaceHub(t *testing.T) {
	for _, tc := range []struct {
		path             string
		include, exclude []string
		want             bool
	}{
		{"anything", nil, nil, true},
		{"original/sub/x.pth", []string{"original/"}, nil, true},
		{"original/sub/x.pth", []string{"original/*"}, nil, true},
		{"model.safetensors", []string{"original/"}, nil, false},
		{"sub/config.json", []string{"config.json"}, nil, false}, // whole paths, not base names
		{"model.safetensors", nil, []string{"*.pth"}, true},
		{"original/x.pth", nil, []string{"original/"}, false},
		{"a.json", []string{"*.json"}, []string{"a.*"}, false}, // exclude wins
	} {
		if got := SelectFile(tc.path, tc.include, tc.exclude); got != tc.want {
			t.Errorf("SelectFile(%q, include %q, exclude %q) = %v, want %v", tc.path, tc.include, tc.exclude, got, tc.want)
		}
	}
}
