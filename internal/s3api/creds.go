package s3api

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// credential is one access key of the s3-credentials-file: the secret its
// requests are signed with and the caller they are served as.
type credential struct {
	secret string
	caller hub.Caller
}

// String and GoString keep %v and %#v from printing the secret.
func (c credential) String() string   { return "s3credential(" + c.caller.String() + ")" }
func (c credential) GoString() string { return c.String() }

// anonymousToken, in a credentials file's token column, serves a key's
// requests as the anonymous caller: for clients that always sign.
const anonymousToken = "-"

// readCredentials reads an s3-credentials-file. Plain lines, like
// client-tokens-file, rather than YAML: three words a line,
//
//	ACCESS_KEY_ID  SECRET_ACCESS_KEY  HUB_TOKEN
//
// separated by spaces or tabs; HUB_TOKEN is the Hub token requests signed
// with that key are made with, or "-" for the anonymous caller. Blank lines
// and lines starting with '#' are skipped. The file holds secrets, so one
// that other users may open is refused rather than trusted; errors name
// lines, never what they hold.
func readCredentials(name string) (map[string]credential, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The mode is read from the open file, not the name: the file checked
	// is the file read.
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	if perm := st.Mode().Perm(); perm&0o007 != 0 {
		return nil, fmt.Errorf("%s holds secrets but other users may open it (mode %04o); chmod o-rwx it "+
			"(in Kubernetes, give its secret volume defaultMode 0400 or 0440)", name, perm)
	}
	keys := map[string]credential{}
	firstLine := map[string]int{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 3 {
			return nil, fmt.Errorf("%s:%d: a line is ACCESS_KEY_ID SECRET_ACCESS_KEY HUB_TOKEN (or - for anonymous), not %d words", name, n, len(fields))
		}
		id, secret, token := fields[0], fields[1], fields[2]
		switch {
		case !validAccessKeyID(id):
			return nil, fmt.Errorf("%s:%d: an access key id is at most %d letters, digits, '_', '-' and '.'", name, n, maxAccessKeyLen)
		case strings.HasPrefix(id, hubTokenPrefix):
			return nil, fmt.Errorf("%s:%d: an access key id starting with %s is taken as a Hub token, never looked up here; choose another", name, n, hubTokenPrefix)
		case firstLine[id] != 0:
			return nil, fmt.Errorf("%s:%d: the access key id of line %d again", name, n, firstLine[id])
		}
		firstLine[id] = n
		c := credential{secret: secret}
		if token != anonymousToken {
			c.caller = hub.NewCaller("Bearer " + token)
		}
		keys[id] = c
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(keys) == 0 {
		return nil, errors.New(name + " lists no access keys")
	}
	return keys, nil
}
