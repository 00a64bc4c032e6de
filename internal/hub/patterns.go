package hub

import (
	"strings"
	"unicode/utf8"
)

// Selecting a repo's files by pattern, as huggingface_hub's allow_patterns
// and ignore_patterns do (utils/_paths.py, filter_repo_objects): each
// pattern is matched against the file's whole path with Python's
// fnmatch.fnmatch, and a pattern ending in "/" gets a "*" added, so
// "original/" means everything under original/. Go's path.Match is not
// that: its "*" stops at "/", and users copy their patterns from
// snapshot_download calls. hubproxy pull and the admin API's prefetch both
// select with SelectFile.

// hubPattern is a pattern as huggingface_hub rewrites it before matching.
func hubPattern(p string) string {
	if strings.HasSuffix(p, "/") {
		return p + "*"
	}
	return p
}

// SelectFile reports whether path passes include (none: every path) and
// no exclude, as filter_repo_objects decides.
func SelectFile(path string, include, exclude []string) bool {
	if len(include) > 0 && !anyMatch(path, include) {
		return false
	}
	return !anyMatch(path, exclude)
}

func anyMatch(path string, patterns []string) bool {
	for _, p := range patterns {
		if Fnmatch(path, hubPattern(p)) {
			return true
		}
	}
	return false
}

// Fnmatch is Python's fnmatch.fnmatch on POSIX (case-sensitive): "*"
// matches any run of characters, "/" included; "?" any one character; "[seq]"
// one character in seq, "[!seq]" one not in it, with ranges "a-z". A "["
// with no closing "]" is a literal "[". There is no escaping: a backslash
// is an ordinary character, as in fnmatch. Every pattern is valid.
func Fnmatch(name, pattern string) bool {
	// Iterative matching with one backtrack point, the last "*": a "*"
	// matches everything, "/" included, so no earlier star ever needs to
	// be revisited (the classic wildcard algorithm).
	n, p := 0, 0
	starP, starN := -1, 0
	for n < len(name) {
		if p < len(pattern) {
			switch pattern[p] {
			case '*':
				starP, starN = p, n
				p++
				continue
			case '?':
				_, w := utf8.DecodeRuneInString(name[n:])
				n += w
				p++
				continue
			case '[':
				if set, next, ok := parseSet(pattern, p); ok {
					r, w := utf8.DecodeRuneInString(name[n:])
					if set.has(r) {
						n += w
						p = next
						continue
					}
					break
				}
				if name[n] == '[' { // no closing "]": a literal "["
					n++
					p++
					continue
				}
			default:
				r, pw := utf8.DecodeRuneInString(pattern[p:])
				c, nw := utf8.DecodeRuneInString(name[n:])
				if r == c {
					n += nw
					p += pw
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		// Let the last "*" take one more character and try again.
		_, w := utf8.DecodeRuneInString(name[starN:])
		starN += w
		n, p = starN, starP+1
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// charSet is a bracket expression: its members and ranges, maybe negated.
type charSet struct {
	negate bool
	ranges [][2]rune // inclusive; a single character is [c, c]
}

func (s charSet) has(r rune) bool {
	in := false
	for _, rg := range s.ranges {
		if rg[0] <= r && r <= rg[1] {
			in = true
			break
		}
	}
	return in != s.negate
}

// parseSet reads the bracket expression at pattern[open] ("["), returning
// it and the index after its "]"; ok is false when no "]" closes it. As in
// fnmatch.translate: a "!" first negates, a "]" first (after any "!") is a
// member, "a-z" is a range, a range whose ends are reversed matches
// nothing, and "-" first or last is a member.
func parseSet(pattern string, open int) (set charSet, next int, ok bool) {
	i := open + 1
	j := i
	if j < len(pattern) && pattern[j] == '!' {
		j++
	}
	if j < len(pattern) && pattern[j] == ']' {
		j++
	}
	for j < len(pattern) && pattern[j] != ']' {
		j++
	}
	if j >= len(pattern) {
		return charSet{}, 0, false
	}
	body := []rune(pattern[i:j])
	if len(body) > 0 && body[0] == '!' {
		set.negate = true
		body = body[1:]
	}
	for k := 0; k < len(body); {
		if k+2 < len(body) && body[k+1] == '-' {
			if body[k] <= body[k+2] {
				set.ranges = append(set.ranges, [2]rune{body[k], body[k+2]})
			}
			k += 3
			continue
		}
		set.ranges = append(set.ranges, [2]rune{body[k], body[k]})
		k++
	}
	return set, j + 1, true
}
