package harness

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/hubproxy/hubproxy/internal/sharedstore/miniotest"
)

// s3Node is one hubproxy started with its S3 API on a port of its own, and
// that API's base URL.
type s3Node struct {
	*server
	s3URL string
}

// startS3Node starts a fresh hubproxy (empty cache) serving both its hub
// routes and, on another port, its S3 API. Each gets a new S3 port, so a
// restart never waits on the last one's.
func (b *bench) startS3Node(ctx context.Context, label string) (*s3Node, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	srv := newHubproxyNode(b.procs, b.work, label, b.hubproxyBin, b.hub.URL, []string{"--s3-listen", addr}, nil)
	// serve binds the S3 listener before it serves the hub routes, so the
	// readiness check on those also covers it.
	if err := srv.restart(ctx); err != nil {
		srv.stop()
		return nil, err
	}
	return &s3Node{server: srv, s3URL: "http://" + addr}, nil
}

// s3ObjectURL is f's object URL in hubproxy's models bucket at main.
func s3ObjectURL(base string, f modelFile) string {
	return base + "/models/" + f.repo + "/" + f.path
}

// s3 is scenario 11. Cold: for every repetition, a fresh hubproxy serves
// the large file whole through /resolve/, then another fresh one through
// its S3 API; each must end with the file verified in its cache. Warm: the
// last one, now holding the file, against MinIO holding the same bytes,
// with ranged GETs of S3RangeSize at each of S3Conns connections (Run:ai
// streamer's pattern) and whole-object GETs.
func (b *bench) s3(ctx context.Context) (*S3Bench, error) {
	f := b.fx.large
	c := b.cfg
	coldTime, coldUp := samples{}, samples{}
	var warm *s3Node
	defer func() {
		if warm != nil {
			warm.stop()
		}
	}()
	for rep := 1; rep <= c.Reps; rep++ {
		for _, col := range []string{ColHub, ColS3} {
			if warm != nil {
				warm.stop()
				warm = nil
			}
			nd, err := b.startS3Node(ctx, fmt.Sprintf("hubproxy-s3-r%d-%s", rep, map[string]string{ColHub: "hub", ColS3: "s3"}[col]))
			if err != nil {
				return nil, err
			}
			warm = nd
			u := fileURL(nd.baseURL(), f.repo, f.path)
			if col == ColS3 {
				u = s3ObjectURL(nd.s3URL, f)
			}
			cl := newClient(1)
			up, d, err := b.upstream(func() error { return download(ctx, cl, u, f.size, f.sha256) })
			cl.CloseIdleConnections()
			if err == nil {
				_, err = b.cachedBlob(ctx, nd.server, f)
			}
			if err != nil {
				return nil, fmt.Errorf("scenario 11, cold %s, repetition %d: %w", col, rep, err)
			}
			coldTime.add(col, d.Seconds())
			coldUp.add(col, float64(up)/float64(f.size))
			b.logf("11 s3 cold       %-20s %7.2f s  %6.0f MiB/s  upstream %.2fx", col, d.Seconds(), mibps(f.size, d), float64(up)/float64(f.size))
		}
	}

	if err := b.minio.restart(ctx); err != nil {
		return nil, err
	}
	defer b.minio.stop()
	minioURL, err := b.minio.publish(ctx, f.repo+"/"+f.path, f.data)
	if err != nil {
		return nil, err
	}
	urls := map[string]string{ColS3: s3ObjectURL(warm.s3URL, f), ColMinio: minioURL}
	warmCols := []string{ColS3, ColMinio}
	// One checked whole read from each: the bytes are the file's, and
	// MinIO's are in the page cache as hubproxy's are.
	for _, col := range warmCols {
		cl := newClient(1)
		err := download(ctx, cl, urls[col], f.size, f.sha256)
		cl.CloseIdleConnections()
		if err != nil {
			return nil, fmt.Errorf("scenario 11, warm-up read from %s: %w", col, err)
		}
	}

	type pattern struct {
		title     string
		mbs, p99  samples
		ups       samples
		run       func(ctx context.Context, u string, seed uint64) (loadResult, error)
		headlined bool
	}
	var pats []*pattern
	for _, conns := range c.S3Conns {
		pats = append(pats, &pattern{title: fmt.Sprintf("warm ranged GETs of %s, %d conns", sizeName(c.S3RangeSize), conns), headlined: true,
			run: func(ctx context.Context, u string, seed uint64) (loadResult, error) {
				return fixedRangeLoad(ctx, u, f.size, c.S3RangeSize, conns, c.RangeDuration, seed)
			}})
	}
	pats = append(pats, &pattern{title: "warm whole-object GETs, 1 conn", headlined: true,
		run: func(ctx context.Context, u string, _ uint64) (loadResult, error) {
			return wholeLoad(ctx, u, f.size, c.RangeDuration)
		}})
	seed := uint64(11000)
	for rep := 1; rep <= c.Reps; rep++ {
		for _, p := range pats {
			if p.mbs == nil {
				p.mbs, p.p99, p.ups = samples{}, samples{}, samples{}
			}
			for _, col := range warmCols {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				seed++
				var res loadResult
				up, _, err := b.upstream(func() error {
					var err error
					res, err = p.run(ctx, urls[col], seed)
					return err
				})
				if err != nil {
					return nil, fmt.Errorf("scenario 11, %s, %s, repetition %d: %w", p.title, col, rep, err)
				}
				rate := float64(res.bytes) / float64(MiB) / res.elapsed.Seconds()
				p99 := percentile(res.latencies, 99) * 1000
				p.mbs.add(col, rate)
				p.p99.add(col, p99)
				if col == ColS3 {
					p.ups.add(col, float64(up)/float64(MiB))
				}
				b.logf("11 s3 %-34s %-16s %6.0f MiB/s  p99 %8.2f ms  %d requests", p.title, col, rate, p99, res.requests)
			}
		}
	}

	title := "cold whole-object GET, 1 conn"
	out := &S3Bench{Size: f.size, Range: c.S3RangeSize}
	for _, p := range pats {
		out.Measures = append(out.Measures,
			Measure{Scenario: 11, Title: p.title, Metric: "throughput", Unit: "MiB/s", Better: Higher, Samples: p.mbs, Headline: p.headlined},
			Measure{Scenario: 11, Title: p.title, Metric: "p99 latency", Unit: "ms", Better: Lower, Samples: p.p99, Headline: p.headlined},
			Measure{Scenario: 11, Title: p.title, Metric: "upstream bytes", Unit: "MiB", Better: Lower, Samples: p.ups,
				Note: "hubproxy only: a warm read should cost none"})
	}
	out.Measures = append(out.Measures,
		Measure{Scenario: 11, Title: title, Metric: "throughput", Unit: "MiB/s", Better: Higher, Samples: rates(coldTime, f.size), Headline: true},
		Measure{Scenario: 11, Title: title, Metric: "upstream bytes / file size", Unit: "x", Better: Lower, Samples: coldUp, Headline: true})
	return out, nil
}

// wholeLoad reads all of u back to back on one keep-alive connection for
// d, at least once, checking each length, and returns every request's
// latency and the bytes moved. (The warm-up read checked the bytes; hashing
// here would time the client.)
func wholeLoad(ctx context.Context, u string, size int64, d time.Duration) (loadResult, error) {
	cl := newClient(1)
	defer cl.CloseIdleConnections()
	var res loadResult
	start := time.Now()
	for res.requests == 0 || time.Since(start) < d {
		t0 := time.Now()
		if err := download(ctx, cl, u, size, [32]byte{}); err != nil {
			return res, err
		}
		res.latencies = append(res.latencies, time.Since(t0).Seconds())
		res.requests++
		res.bytes += size
	}
	res.elapsed = time.Since(start)
	return res, res.finish(ctx, nil, d)
}

// publish uploads data as key into the bucket and lets anyone read the
// bucket's objects, as a bucket a model loader reads without credentials
// is set up; it returns the object's unsigned URL.
func (m *minio) publish(ctx context.Context, key string, data []byte) (string, error) {
	cl := m.srv.Client()
	if _, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(miniotest.Bucket), Key: aws.String(key),
		Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data)))}); err != nil {
		return "", fmt.Errorf("harness: upload into MinIO: %w", err)
	}
	policy := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":["*"]},"Action":["s3:GetObject"],"Resource":["arn:aws:s3:::%s/*"]}]}`, miniotest.Bucket)
	if _, err := cl.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String(miniotest.Bucket), Policy: aws.String(policy)}); err != nil {
		return "", fmt.Errorf("harness: MinIO bucket policy: %w", err)
	}
	u := m.srv.Endpoint + "/" + miniotest.Bucket + "/" + key
	// An anonymous HEAD proves the policy took: the runs use no credentials.
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := newClient(1).Do(req)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", &StatusError{URL: u, Status: resp.StatusCode, Want: http.StatusOK, Body: "anonymous HEAD after setting the bucket policy"}
	}
	return u, nil
}
