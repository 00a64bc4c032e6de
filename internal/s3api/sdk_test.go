package s3api_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// listAll lists prefix with ListObjectsV2's paginator, max keys a page.
func listAll(t *testing.T, c *s3.Client, prefix, delimiter string, max int32) (keys []types.Object, prefixes []string, pages int) {
	t.Helper()
	in := &s3.ListObjectsV2Input{Bucket: aws.String("models"), Prefix: aws.String(prefix), MaxKeys: aws.Int32(max)}
	if delimiter != "" {
		in.Delimiter = aws.String(delimiter)
	}
	p := s3.NewListObjectsV2Paginator(c, in)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("ListObjectsV2 %q page %d: %v", prefix, pages, err)
		}
		pages++
		if n := len(out.Contents) + len(out.CommonPrefixes); n > int(max) {
			t.Errorf("page %d holds %d entries, over max-keys %d", pages, n, max)
		}
		keys = append(keys, out.Contents...)
		for _, cp := range out.CommonPrefixes {
			prefixes = append(prefixes, aws.ToString(cp.Prefix))
		}
	}
	return keys, prefixes, pages
}

// The paginator with max-keys 2 over nested folders lists exactly the hub
// tree's files (a recursive tree paged 3 entries at a time upstream), in
// key order, with each object's size, ETag and LastModified as HEAD and GET
// answer them.
func TestS3ListMatchesHubTree(t *testing.T) {
	e := newEnv(t, nil)
	c := client(e, "")
	objs, prefixes, pages := listAll(t, c, "org/model/", "", 2)
	files := modelFiles()
	var want []string
	for _, f := range files {
		want = append(want, "org/model/"+f.Path)
	}
	slices.Sort(want)
	var got []string
	for _, o := range objs {
		got = append(got, aws.ToString(o.Key))
	}
	if !slices.Equal(got, want) || len(prefixes) != 0 {
		t.Fatalf("listed %q (prefixes %q); want %q", got, prefixes, want)
	}
	if pages != (len(want)+1)/2 {
		t.Errorf("%d pages; want %d", pages, (len(want)+1)/2)
	}
	for _, o := range objs {
		key := aws.ToString(o.Key)
		path := strings.TrimPrefix(key, "org/model/")
		fi, ok := e.Hub.Stat(modelRepo, "main", path)
		if !ok {
			t.Fatalf("hub has no %s", path)
		}
		if aws.ToInt64(o.Size) != fi.Size || aws.ToString(o.ETag) != `"`+fi.ETag+`"` {
			t.Errorf("%s: listed size %d etag %s; hub has %d %q", key, aws.ToInt64(o.Size), aws.ToString(o.ETag), fi.Size, fi.ETag)
		}
		head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("models"), Key: o.Key})
		if err != nil {
			t.Fatalf("HeadObject %s: %v", key, err)
		}
		get, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: o.Key})
		if err != nil {
			t.Fatalf("GetObject %s: %v", key, err)
		}
		body, err := io.ReadAll(get.Body)
		get.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range []struct {
			what string
			size int64
			etag string
			mod  string
		}{
			{"head", aws.ToInt64(head.ContentLength), aws.ToString(head.ETag), aws.ToTime(head.LastModified).String()},
			{"get", aws.ToInt64(get.ContentLength), aws.ToString(get.ETag), aws.ToTime(get.LastModified).String()},
		} {
			if a.size != aws.ToInt64(o.Size) || a.etag != aws.ToString(o.ETag) || a.mod != aws.ToTime(o.LastModified).String() {
				t.Errorf("%s %s: size %d etag %s modified %s; listing says %d %s %s", a.what, key, a.size, a.etag, a.mod,
					aws.ToInt64(o.Size), aws.ToString(o.ETag), aws.ToTime(o.LastModified))
			}
		}
		if int64(len(body)) != fi.Size || !bytes.Equal(body, fileData(t, path)) {
			t.Errorf("GetObject %s: %d bytes, not the file's %d", key, len(body), fi.Size)
		}
		if aws.ToTime(o.LastModified).IsZero() || aws.ToTime(o.LastModified).Year() < 2000 {
			t.Errorf("%s: LastModified %s is not the commit's date", key, aws.ToTime(o.LastModified))
		}
	}
	// A second listing is the same, byte for byte of the XML's meaning.
	again, _, _ := listAll(t, c, "org/model/", "", 1000)
	for i := range again {
		if aws.ToString(again[i].ETag) != aws.ToString(objs[i].ETag) || !aws.ToTime(again[i].LastModified).Equal(aws.ToTime(objs[i].LastModified)) {
			t.Errorf("listing changed between requests at %s", aws.ToString(again[i].Key))
		}
	}
}

func fileData(t *testing.T, path string) []byte {
	t.Helper()
	for _, f := range modelFiles() {
		if f.Path == path {
			return f.Data
		}
	}
	t.Fatalf("no file %s", path)
	return nil
}

// A delimiter rolls folders into common prefixes, which count towards
// max-keys and are never repeated across pages; a prefix inside a folder
// lists only it.
func TestS3ListDelimiter(t *testing.T) {
	e := newEnv(t, nil)
	c := client(e, "")
	for _, max := range []int32{1, 2, 1000} {
		objs, prefixes, _ := listAll(t, c, "org/model/", "/", max)
		var keys []string
		for _, o := range objs {
			keys = append(keys, aws.ToString(o.Key))
		}
		if want := []string{"org/model/config.json", "org/model/z.txt"}; !slices.Equal(keys, want) {
			t.Errorf("max %d: keys %q; want %q", max, keys, want)
		}
		if want := []string{"org/model/a/", "org/model/weights/", "org/model/with space/"}; !slices.Equal(prefixes, want) {
			t.Errorf("max %d: prefixes %q; want %q", max, prefixes, want)
		}
	}
	objs, prefixes, _ := listAll(t, c, "org/model/a/", "/", 1000)
	if len(objs) != 1 || aws.ToString(objs[0].Key) != "org/model/a/x.bin" || !slices.Equal(prefixes, []string{"org/model/a/b/"}) {
		t.Errorf("a/: %v %q", objs, prefixes)
	}
	// `aws s3 ls s3://models/org/model` (no slash) shows the repo's folder.
	_, prefixes, _ = listAll(t, c, "org/model", "/", 1000)
	if !slices.Equal(prefixes, []string{"org/model/"}) {
		t.Errorf("prefix org/model: prefixes %q", prefixes)
	}
	// A prefix naming no folder, a revision or (to a token) a repo that
	// does not exist, list empty. To an anonymous caller the Hub answers a
	// missing repo as it does a private one (401), which is AccessDenied.
	for _, p := range []string{"org/model/nope/", "org/model/weights/zz", "org/model@nobranch/", "org/nosuchrepo/"} {
		if objs, prefixes, _ := listAll(t, client(e, tokGranted), p, "/", 1000); len(objs)+len(prefixes) != 0 {
			t.Errorf("%s: listed %v %q", p, objs, prefixes)
		}
	}
	_, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("models"), Prefix: aws.String("org/nosuchrepo/")})
	wantCode(t, "anonymous listing of a missing repo", err, "AccessDenied", http.StatusForbidden)
	// start-after skips what sorts before it.
	out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("models"), Prefix: aws.String("org/model/"), StartAfter: aws.String("org/model/weights/")})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	if want := []string{"org/model/weights/model-00001-of-00002.safetensors", "org/model/weights/model-00002-of-00002.safetensors", "org/model/with space/é.txt", "org/model/z.txt"}; !slices.Equal(keys, want) {
		t.Errorf("start-after: %q; want %q", keys, want)
	}
}

// ListObjects v1 pages by marker (NextMarker) and url-encodes keys when
// asked.
func TestS3ListV1(t *testing.T) {
	e := newEnv(t, nil)
	c := client(e, "")
	var keys []string
	marker := ""
	for page := 0; ; page++ {
		if page > 20 {
			t.Fatal("v1 listing does not end")
		}
		out, err := c.ListObjects(ctx, &s3.ListObjectsInput{Bucket: aws.String("models"), Prefix: aws.String("org/model/"), MaxKeys: aws.Int32(3), Marker: aws.String(marker)})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		marker = aws.ToString(out.NextMarker)
	}
	if len(keys) != len(modelFiles()) || !slices.IsSorted(keys) {
		t.Errorf("v1 listed %q", keys)
	}
	resp := rawDo(t, e, "GET", "/models?list-type=2&prefix=org/model/with&encoding-type=url")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "<Key>org/model/with+space/%C3%A9.txt</Key>") || !strings.Contains(string(body), "<EncodingType>url</EncodingType>") {
		t.Errorf("encoding-type=url answer: %s", body)
	}
}

// Ranged GETs return exactly the bytes asked, 206 with Content-Range; a
// range past the end is 416 InvalidRange with Content-Range bytes */size.
func TestS3RangedGet(t *testing.T) {
	e := newEnv(t, nil)
	c := client(e, "")
	path := "weights/model-00002-of-00002.safetensors"
	data := fileData(t, path)
	size := int64(len(data))
	key := aws.String("org/model/" + path)
	for _, r := range []struct {
		header     string
		start, end int64
	}{
		{"bytes=0-0", 0, 1},
		{"bytes=1000000-1999999", 1000000, 2000000},
		{fmt.Sprintf("bytes=%d-", size-5), size - 5, size},
		{"bytes=-100", size - 100, size},
		{fmt.Sprintf("bytes=%d-%d", size-10, size+1000), size - 10, size},
	} {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: key, Range: aws.String(r.header)})
		if err != nil {
			t.Fatalf("%s: %v", r.header, err)
		}
		body, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		wantRange := fmt.Sprintf("bytes %d-%d/%d", r.start, r.end-1, size)
		if !bytes.Equal(body, data[r.start:r.end]) || aws.ToString(out.ContentRange) != wantRange || aws.ToInt64(out.ContentLength) != r.end-r.start {
			t.Errorf("%s: %d bytes, Content-Range %q, length %d; want [%d,%d) %q", r.header, len(body), aws.ToString(out.ContentRange), aws.ToInt64(out.ContentLength), r.start, r.end, wantRange)
		}
	}
	_, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: key, Range: aws.String(fmt.Sprintf("bytes=%d-", size))})
	wantCode(t, "range past the end", err, "InvalidRange", http.StatusRequestedRangeNotSatisfiable)
	resp := rawDo(t, e, "GET", "/models/org/model/"+path, "Range", fmt.Sprintf("bytes=%d-%d", size+1, size+10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestedRangeNotSatisfiable || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes */%d", size) {
		t.Errorf("416: status %d, Content-Range %q", resp.StatusCode, resp.Header.Get("Content-Range"))
	}
}

// If-None-Match and If-Modified-Since make 304; If-Match and
// If-Unmodified-Since that fail make 412 PreconditionFailed.
func TestS3Conditional(t *testing.T) {
	e := newEnv(t, nil)
	c := client(e, "")
	key := aws.String("org/model/config.json")
	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("models"), Key: key})
	if err != nil {
		t.Fatal(err)
	}
	etag, mod := aws.ToString(head.ETag), aws.ToTime(head.LastModified)
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: key, IfNoneMatch: aws.String(etag)})
	wantCode(t, "If-None-Match", err, "NotModified", http.StatusNotModified)
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: key, IfModifiedSince: aws.Time(mod)})
	wantCode(t, "If-Modified-Since", err, "NotModified", http.StatusNotModified)
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: key, IfMatch: aws.String(`"0000"`)})
	wantCode(t, "If-Match", err, "PreconditionFailed", http.StatusPreconditionFailed)
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: key, IfUnmodifiedSince: aws.Time(mod.Add(-1e9 * 3600))})
	wantCode(t, "If-Unmodified-Since", err, "PreconditionFailed", http.StatusPreconditionFailed)
	// Conditions that hold serve the object.
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: key, IfMatch: aws.String(etag),
		IfNoneMatch: aws.String(`"other"`), IfModifiedSince: aws.Time(mod.Add(-1e9 * 3600))})
	if err != nil {
		t.Fatalf("conditions that hold: %v", err)
	}
	body, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if !bytes.Equal(body, fileData(t, "config.json")) {
		t.Errorf("body %q", body)
	}
}

// A gated repo is refused to the anonymous caller and to a token the Hub
// has not granted, as AccessDenied, and served to a granted token, by
// header signature and by presigned URL alike.
func TestS3GatedRepo(t *testing.T) {
	e := newEnv(t, nil)
	key := aws.String("org/gated/model.safetensors")
	for _, tok := range []string{"", tokDenied} {
		_, err := client(e, tok).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: key})
		wantCode(t, "GetObject as "+tok, err, "AccessDenied", http.StatusForbidden)
		_, err = client(e, tok).HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("models"), Key: key})
		if _, status := s3Code(t, err); status != http.StatusForbidden {
			t.Errorf("HeadObject as %q: %v", tok, err)
		}
	}
	out, err := client(e, tokGranted).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: key})
	if err != nil {
		t.Fatalf("granted token: %v", err)
	}
	body, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if fi, _ := e.Hub.Stat(gatedRepo, "main", "model.safetensors"); int64(len(body)) != fi.Size {
		t.Fatalf("granted token read %d bytes of %d", len(body), fi.Size)
	}
	ps, err := s3.NewPresignClient(client(e, tokGranted)).PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: key})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(ps.URL)
	if err != nil {
		t.Fatal(err)
	}
	pbody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(pbody, body) {
		t.Errorf("presigned GET: %d, %d bytes", resp.StatusCode, len(pbody))
	}
	// A presigned URL for the denied token is refused the same way.
	ps, _ = s3.NewPresignClient(client(e, tokDenied)).PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: key})
	if resp, err = http.Get(ps.URL); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("presigned GET with a denied token: %d", resp.StatusCode)
	}
}

// partNumber 1 is the whole object (each is one part), answered 206 as S3
// answers it; other parts and partNumber with Range are refused.
func TestS3PartNumber(t *testing.T) {
	e := newEnv(t, nil)
	c := client(e, "")
	path := "weights/model-00001-of-00002.safetensors"
	data := fileData(t, path)
	key := aws.String("org/model/" + path)
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: key, PartNumber: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if !bytes.Equal(body, data) || aws.ToString(out.ContentRange) != fmt.Sprintf("bytes 0-%d/%d", len(data)-1, len(data)) {
		t.Errorf("part 1: %d bytes, Content-Range %q", len(body), aws.ToString(out.ContentRange))
	}
	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("models"), Key: key, PartNumber: aws.Int32(1)})
	if err != nil || aws.ToInt64(head.ContentLength) != int64(len(data)) {
		t.Errorf("HEAD part 1: %v, %d", err, aws.ToInt64(head.ContentLength))
	}
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: key, PartNumber: aws.Int32(2)})
	wantCode(t, "part 2", err, "InvalidPartNumber", http.StatusRequestedRangeNotSatisfiable)
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: key, PartNumber: aws.Int32(1), Range: aws.String("bytes=0-1")})
	wantCode(t, "part and range", err, "InvalidRequest", http.StatusBadRequest)
}
