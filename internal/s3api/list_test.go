package s3api

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

func objs(paths ...string) []object {
	var out []object
	for _, p := range paths {
		out = append(out, object{path: p})
	}
	return out
}

func keysOf(l listed) []string {
	var out []string
	for _, o := range l.objects {
		out = append(out, o.path)
	}
	return out
}

// Paging through a listing one entry at a time, resuming after each
// page's last entry, gives the same keys and prefixes as one page, none
// twice: with a delimiter too, where the resumption point is a prefix.
func TestPaginateResumes(t *testing.T) {
	tree := objs("a/b/c", "a/b/d", "a/x", "b", "c/d/e", "c/f", "d", "with space/é")
	for _, delim := range []string{"", "/"} {
		for _, prefix := range []string{"r/", "r/a/", "r/c", "r/zz"} {
			whole := paginate(tree, "r/", listParams{prefix: prefix, delimiter: delim, max: 1000})
			if whole.truncated {
				t.Fatalf("one page of 1000 truncated")
			}
			for _, max := range []int{1, 2, 3} {
				var keys, prefixes []string
				after := ""
				for i := 0; ; i++ {
					if i > 20 {
						t.Fatal("listing does not end")
					}
					page := paginate(tree, "r/", listParams{prefix: prefix, delimiter: delim, max: max, after: after})
					if n := len(page.objects) + len(page.prefixes); n > max || n == 0 && page.truncated {
						t.Fatalf("page of %d entries (max %d, truncated %v)", n, max, page.truncated)
					}
					keys = append(keys, keysOf(page)...)
					prefixes = append(prefixes, page.prefixes...)
					if !page.truncated {
						break
					}
					after = page.last
				}
				if !slices.Equal(keys, keysOf(whole)) || !slices.Equal(prefixes, whole.prefixes) {
					t.Errorf("prefix %q delim %q max %d: keys %q prefixes %q; one page has %q %q",
						prefix, delim, max, keys, prefixes, keysOf(whole), whole.prefixes)
				}
			}
		}
	}
	got := paginate(tree, "r/", listParams{prefix: "r/", delimiter: "/", max: 1000})
	if want := []string{"r/a/", "r/c/", "r/with space/"}; !slices.Equal(got.prefixes, want) {
		t.Errorf("prefixes %q; want %q", got.prefixes, want)
	}
	if want := []string{"r/b", "r/d"}; !slices.Equal(keysOf(got), want) {
		t.Errorf("keys %q; want %q", keysOf(got), want)
	}
	if got := paginate(tree, "r/", listParams{prefix: "r/", max: 0}); got.truncated || len(got.objects) != 0 {
		t.Errorf("max-keys 0: %+v", got)
	}
}

func TestParseListParams(t *testing.T) {
	q := func(s string) url.Values { v, _ := url.ParseQuery(s); return v }
	for in, want := range map[string]int{"": 1000, "max-keys=5": 5, "max-keys=0": 0, "max-keys=1001": 1000,
		"max-keys=99999999999999999999999": 1000} {
		p, err := parseListParams(q(in))
		if err != nil || p.max != want {
			t.Errorf("%q: max %d, %v; want %d", in, p.max, err, want)
		}
	}
	tok := token(strings.Repeat("a", 40), "org/m/x")
	p, err := parseListParams(q("list-type=2&start-after=ignored&continuation-token=" + tok))
	if err != nil || p.commit != strings.Repeat("a", 40) || p.after != "org/m/x" {
		t.Errorf("token: %+v %v", p, err)
	}
	for _, in := range []string{"max-keys=-1", "max-keys=1e3", "list-type=1", "encoding-type=xml",
		"list-type=2&continuation-token=!!", "list-type=2&continuation-token=" + token("main", "x")} {
		if _, err := parseListParams(q(in)); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestByteRange(t *testing.T) {
	type r struct {
		start, end int64
		partial    bool
		err        bool
	}
	for _, c := range []struct {
		h    string
		size int64
		want r
	}{
		{"", 10, r{0, 10, false, false}},
		{"bytes=0-0", 10, r{0, 1, true, false}},
		{"bytes=2-", 10, r{2, 10, true, false}},
		{"bytes=-3", 10, r{7, 10, true, false}},
		{"bytes=-30", 10, r{0, 10, true, false}},
		{"bytes=5-100", 10, r{5, 10, true, false}},
		{"bytes=10-", 10, r{err: true}},
		{"bytes=10-20", 10, r{err: true}},
		{"bytes=-0", 10, r{err: true}},
		{"bytes=0-0", 0, r{err: true}},
		// What S3 cannot parse, or several ranges, it ignores: the whole.
		{"bytes=5-2", 10, r{0, 10, false, false}},
		{"bytes=a-b", 10, r{0, 10, false, false}},
		{"items=0-1", 10, r{0, 10, false, false}},
		{"bytes=0-1,3-4", 10, r{0, 10, false, false}},
	} {
		s, e, p, err := byteRange(c.h, c.size)
		got := r{s, e, p, err != nil}
		if c.want.err {
			got = r{err: err != nil}
		}
		if got != c.want {
			t.Errorf("%q of %d: %+v; want %+v", c.h, c.size, got, c.want)
		}
		if err != nil && toS3(err).ContentRange != "bytes */"+itoa(c.size) {
			t.Errorf("%q: Content-Range %q", c.h, toS3(err).ContentRange)
		}
	}
}

func TestPreconditions(t *testing.T) {
	mod := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	before, after := mod.Add(-time.Hour).Format(http.TimeFormat), mod.Add(time.Hour).Format(http.TimeFormat)
	at := mod.Format(http.TimeFormat)
	for _, c := range []struct {
		hdr  []string
		want int
	}{
		{nil, 0},
		{[]string{"If-Match", `"e"`}, 0},
		{[]string{"If-Match", `"x", W/"e"`}, 0},
		{[]string{"If-Match", `*`}, 0},
		{[]string{"If-Match", `"x"`}, 412},
		{[]string{"If-Unmodified-Since", before}, 412},
		{[]string{"If-Unmodified-Since", at}, 0},
		// If-Match holding wins over If-Unmodified-Since failing, as in S3.
		{[]string{"If-Match", `"e"`, "If-Unmodified-Since", before}, 0},
		{[]string{"If-None-Match", `"e"`}, 304},
		{[]string{"If-None-Match", `"x"`}, 0},
		{[]string{"If-Modified-Since", at}, 304},
		{[]string{"If-Modified-Since", after}, 304},
		{[]string{"If-Modified-Since", before}, 0},
		{[]string{"If-None-Match", `"x"`, "If-Modified-Since", at}, 0},
		{[]string{"If-Match", `"x"`, "If-None-Match", `"e"`}, 412},
	} {
		h := http.Header{}
		for i := 0; i < len(c.hdr); i += 2 {
			h.Set(c.hdr[i], c.hdr[i+1])
		}
		if got := preconditions(h, "e", mod); got != c.want {
			t.Errorf("%q: %d; want %d", c.hdr, got, c.want)
		}
	}
	h := http.Header{"If-Modified-Since": {at}}
	if got := preconditions(h, "e", time.Time{}); got != 0 {
		t.Errorf("without a date, If-Modified-Since decided %d", got)
	}
}
