// Package secret hides credentials in text meant for people: configuration
// printed by `hubproxy config`, the start-up log, error messages, and the
// command line pprof shows. It redacts what a URL can carry (userinfo, and
// query parameters named like credentials: token=, secret_key=,
// X-Amz-Signature=, ...) and the values of flags named like credentials.
// Everything else is left as written, so the text stays useful to debug.
//
// It is for display only: nothing redacted here is ever parsed back.
package secret

import (
	"net/url"
	"regexp"
	"strings"
)

// Mask replaces every hidden value.
const Mask = "REDACTED"

// secretWords are the fragments that make a parameter or flag name a
// credential's, matched case-insensitively after '-' and '.' become '_'.
// Over-matching only hides a harmless value; under-matching leaks one.
var secretWords = []string{
	"secret", "passw", "pwd", "token", "signature", "credential",
	"auth", "session", "apikey", "api_key", "access_key", "private_key",
}

// secretNames are short names that are credentials on their own but too
// short to match as fragments ("key" would hide "monkey=").
var secretNames = map[string]bool{"key": true, "sig": true, "sas": true, "code": true, "pass": true}

// IsName reports whether a parameter, flag or configuration key name is one
// that holds a credential.
func IsName(name string) bool {
	n := strings.NewReplacer("-", "_", ".", "_").Replace(strings.ToLower(strings.TrimLeft(name, "-")))
	if secretNames[n] {
		return true
	}
	for _, w := range secretWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// URL returns raw with its credentials hidden: the password of its userinfo
// (or the lone user name, which is often itself a token), and the value of
// each query parameter IsName matches; a parameter whose value is itself a
// URL (?endpoint=http://u:p@minio) is redacted in turn. Text that does not
// parse as a URL is scrubbed as Text does.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme == "" && u.User == nil && u.RawQuery == "") {
		return Text(raw)
	}
	changed := false
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), Mask)
		} else if u.User.Username() != "" {
			u.User = url.User(Mask)
		}
		changed = true
	}
	if u.RawQuery != "" {
		if q := redactQuery(u.RawQuery); q != u.RawQuery {
			u.RawQuery, changed = q, true
		}
	}
	if !changed {
		return raw // keep the text exactly as written
	}
	// url.URL.String escapes the mask's userinfo as needed; the query is
	// already encoded.
	return u.String()
}

// Query returns a raw query (without its '?') with the credentials in it
// hidden, as URL hides them, pair by pair, so the order and encoding of
// everything else stay as written. Unlike URL it reads all of raw: a '#'
// in it is not taken for the start of a fragment.
func Query(raw string) string { return redactQuery(raw) }

// redactQuery redacts a raw query in place, pair by pair, so the order and
// encoding of everything else stay as written.
func redactQuery(raw string) string {
	pairs := strings.Split(raw, "&")
	for i, p := range pairs {
		k, v, hasValue := strings.Cut(p, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			name = k
		}
		switch {
		case !hasValue:
		case IsName(name):
			pairs[i] = k + "=" + Mask
		default:
			if val, err := url.QueryUnescape(v); err == nil && strings.Contains(val, "://") {
				if r := URL(val); r != val {
					pairs[i] = k + "=" + url.QueryEscape(r)
				}
			}
		}
	}
	return strings.Join(pairs, "&")
}

var (
	// userinfoRE is scheme://userinfo@ anywhere in text, up to the last
	// '@' before the host, as a password may hold an unescaped '@'.
	userinfoRE = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)([^/?#\s"'<>]+)@`)
	// paramRE is name=value anywhere in text, name a run of word
	// characters; the value ends at a separator or quote, or at a '?' so
	// that a URL's query in a value is looked at pair by pair.
	paramRE = regexp.MustCompile(`([A-Za-z0-9_.-]+)=([^?&;,\s"'<>)\]}]*)`)
)

// Text scrubs free text (an error message, a log line) of the credentials
// URL would hide, wherever URLs or name=value pairs occur in it.
func Text(s string) string {
	s = userinfoRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := userinfoRE.FindStringSubmatch(m)
		user, _, hasPassword := strings.Cut(sub[2], ":")
		if hasPassword {
			return sub[1] + user + ":" + Mask + "@"
		}
		return sub[1] + Mask + "@"
	})
	return paramRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := paramRE.FindStringSubmatch(m)
		if !IsName(sub[1]) || sub[2] == "" || sub[2] == Mask {
			return m
		}
		return sub[1] + "=" + Mask
	})
}

// Args returns a copy of a command line with credentials hidden: the value
// of every flag IsName matches (--upstream-token X, --token=X), and the
// credentials of every URL.
func Args(args []string) []string {
	out := make([]string, len(args))
	hideNext := false
	for i, a := range args {
		switch {
		case hideNext:
			out[i], hideNext = Mask, false
			continue
		case strings.HasPrefix(a, "-") && a != "-" && a != "--":
			name, _, hasValue := strings.Cut(a, "=")
			if IsName(name) {
				if hasValue {
					out[i] = name + "=" + Mask
				} else {
					// The value is the next argument, unless this is a
					// boolean flag; hiding a following flag's name is
					// the safe mistake.
					out[i], hideNext = a, true
				}
				continue
			}
			if hasValue {
				out[i] = name + "=" + URL(a[len(name)+1:])
				continue
			}
		}
		out[i] = URL(a)
	}
	return out
}

// Error wraps err so that its message is scrubbed as Text does, while
// errors.Is and errors.As still see err. A nil err stays nil.
func Error(err error) error {
	if err == nil {
		return nil
	}
	return &redacted{err: err}
}

type redacted struct{ err error }

func (r *redacted) Error() string { return Text(r.err.Error()) }
func (r *redacted) Unwrap() error { return r.err }
