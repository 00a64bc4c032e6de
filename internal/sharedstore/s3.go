package sharedstore

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// s3Backend is a bucket (and prefix) on S3 or an S3-compatible server.
type s3Backend struct {
	c      *s3.Client
	creds  aws.CredentialsProvider
	bucket string
	prefix string // "" or ending in '/'
	log    *slog.Logger
	getenv func(string) string // os.Getenv; what credentialsError reads
}

// imdsMayHelp reports whether the EC2 instance-metadata service may hold
// credentials for endpoint: AWS's own S3 (no endpoint, or an amazonaws.com
// one: a VPC endpoint, a FIPS one), not another server.
func imdsMayHelp(endpoint string) bool {
	if endpoint == "" {
		return true
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return true // ParseURL checked it; the SDK will say what is wrong
	}
	h := strings.ToLower(u.Hostname())
	return strings.HasSuffix(h, ".amazonaws.com") || strings.HasSuffix(h, ".amazonaws.com.cn")
}

// credentialSources are the variables that name where AWS credentials come
// from; with none of them set, the SDK looks only in the default shared
// files and at the instance or container role.
var credentialSources = []string{
	"AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
	"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
}

// credentialsError is what a failed credential retrieval tells the
// operator. Nothing configured is the common case (a laptop, a pod without
// a role) and the SDK's answer to it is a chain of every provider it
// tried, IMDS timeouts included: say what to set instead, and keep the
// chain for debug. A source that was configured and failed (an expired SSO
// profile, an unreadable token file) keeps the SDK's reason, which names it.
func (b *s3Backend) credentialsError(err error) error {
	var set []string
	for _, v := range credentialSources {
		if b.getenv(v) != "" {
			set = append(set, v)
		}
	}
	b.log.Debug("AWS credential retrieval failed", "configured", set, "err", err)
	if len(set) == 0 {
		return &ConfigError{Err: errors.New("no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile (AWS_PROFILE), or a pod role (IRSA or EKS pod identity)")}
	}
	return &ConfigError{Err: fmt.Errorf("the AWS credentials configured (%s) could not be loaded: %w", strings.Join(set, ", "), err)}
}

// defaultRegion is used when neither the URL nor the AWS configuration names
// one: S3-compatible servers ignore it, and AWS answers a wrong one with a
// redirect that check reports.
const defaultRegion = "us-east-1"

func newS3(ctx context.Context, loc Location, log *slog.Logger) (*s3Backend, error) {
	opts := []func(*config.LoadOptions) error{config.WithLogger(newSDKLogger(log))}
	if loc.Region != "" {
		opts = append(opts, config.WithRegion(loc.Region))
	}
	if !imdsMayHelp(loc.Endpoint) {
		// An S3-compatible server (MinIO, Ceph) never takes an EC2
		// instance role's credentials, so asking the instance-metadata
		// service for them only costs the timeouts of a service that is
		// not there and ends in a confusing error.
		opts = append(opts, config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = defaultRegion
	}
	hc := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		// Many chunk reads run at once against one endpoint; the
		// default of a few idle connections would redial constantly.
		t.MaxIdleConnsPerHost = 64
	}).WithDialerOptions(func(d *net.Dialer) { d.Timeout = 5 * time.Second })
	c := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if loc.Endpoint != "" {
			o.BaseEndpoint = aws.String(loc.Endpoint)
		}
		o.UsePathStyle = loc.PathStyle
		o.HTTPClient = hc
		// Fall back to upstream quickly rather than retry a store
		// that is down: one retry for a blip, no more.
		o.RetryMaxAttempts = 2
		// Checksums only where the API requires them: S3-compatible
		// servers differ in the trailing-checksum encodings they
		// accept, and what is stored is verified by content hash anyway.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	b := &s3Backend{c: c, creds: cfg.Credentials, bucket: loc.Bucket, log: cmp.Or(log, slog.New(slog.DiscardHandler)), getenv: os.Getenv}
	if loc.Prefix != "" {
		b.prefix = loc.Prefix + "/"
	}
	return b, nil
}

func (b *s3Backend) key(k string) *string { return aws.String(b.prefix + k) }

func (b *s3Backend) readRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, int64, error) {
	in := &s3.GetObjectInput{Bucket: &b.bucket, Key: b.key(key)}
	if off > 0 || n >= 0 {
		r := "bytes=" + strconv.FormatInt(off, 10) + "-"
		if n >= 0 {
			if n == 0 {
				// A zero-length range cannot be asked; the size can.
				o, err := b.stat(ctx, key)
				if err != nil {
					return nil, 0, err
				}
				if off > o.Size {
					return nil, o.Size, fmt.Errorf("range at %d of a %d-byte object: %w", off, o.Size, ErrShort)
				}
				return io.NopCloser(bytes.NewReader(nil)), o.Size, nil
			}
			r += strconv.FormatInt(off+n-1, 10)
		}
		in.Range = &r
	}
	out, err := b.c.GetObject(ctx, in)
	if err != nil {
		return nil, 0, b.mapErr(err)
	}
	size := aws.ToInt64(out.ContentLength)
	if in.Range != nil {
		total, ok := totalFromContentRange(aws.ToString(out.ContentRange))
		if !ok {
			out.Body.Close()
			return nil, 0, fmt.Errorf("ranged GET answered without a usable Content-Range (%q)", aws.ToString(out.ContentRange))
		}
		if want := n; want >= 0 && aws.ToInt64(out.ContentLength) != want {
			out.Body.Close()
			return nil, total, fmt.Errorf("asked %d bytes at %d, got %d of a %d-byte object: %w", want, off, aws.ToInt64(out.ContentLength), total, ErrShort)
		}
		size = total
	}
	return out.Body, size, nil
}

// totalFromContentRange reads the complete length of "bytes a-b/total".
func totalFromContentRange(cr string) (int64, bool) {
	_, total, ok := strings.Cut(cr, "/")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(total, 10, 64)
	return n, err == nil && n >= 0
}

func (b *s3Backend) create(ctx context.Context, key string, data []byte) error {
	_, err := b.c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &b.bucket, Key: b.key(key), Body: bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
		IfNoneMatch:   aws.String("*"),
	})
	return b.mapErr(err)
}

func (b *s3Backend) put(ctx context.Context, key string, data []byte) error {
	_, err := b.c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &b.bucket, Key: b.key(key), Body: bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	})
	return b.mapErr(err)
}

func (b *s3Backend) stat(ctx context.Context, key string) (Object, error) {
	out, err := b.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b.bucket, Key: b.key(key)})
	if err != nil {
		return Object{}, b.mapErr(err)
	}
	return Object{Key: key, Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified)}, nil
}

func (b *s3Backend) list(ctx context.Context, prefix string, fn func(Object) error) error {
	p := s3.NewListObjectsV2Paginator(b.c, &s3.ListObjectsV2Input{Bucket: &b.bucket, Prefix: b.key(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return b.mapErr(err)
		}
		for _, o := range page.Contents {
			k := strings.TrimPrefix(aws.ToString(o.Key), b.prefix)
			if err := fn(Object{Key: k, Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *s3Backend) del(ctx context.Context, key string) error {
	_, err := b.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b.bucket, Key: b.key(key)})
	if err := b.mapErr(err); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}

// check asks for credentials and the bucket. No credentials, no bucket,
// refused credentials and a wrong region are *ConfigError; a server that does
// not answer is a plain error.
func (b *s3Backend) check(ctx context.Context) error {
	if _, err := b.creds.Retrieve(ctx); err != nil {
		return b.credentialsError(err)
	}
	_, err := b.c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &b.bucket})
	if err == nil {
		return nil
	}
	switch status(err) {
	case http.StatusNotFound:
		return &ConfigError{Err: fmt.Errorf("bucket %q does not exist", b.bucket)}
	case http.StatusForbidden, http.StatusUnauthorized:
		return &ConfigError{Err: fmt.Errorf("access to bucket %q denied: check the credentials and the bucket policy: %w", b.bucket, err)}
	case http.StatusMovedPermanently, http.StatusBadRequest:
		return &ConfigError{Err: fmt.Errorf("bucket %q refused the request (a wrong region? set ?region= or AWS_REGION): %w", b.bucket, err)}
	}
	return err
}

// mapErr turns S3's answers into the package's: 404 → ErrNotFound, a failed
// precondition (412, or 409 for a conditional write racing another) →
// ErrExists, 416 → ErrShort. Anything else, denials included, is the store
// failing, which at run time is what it is.
func (b *s3Backend) mapErr(err error) error {
	if err == nil {
		return nil
	}
	switch status(err) {
	case http.StatusNotFound:
		var api smithy.APIError
		if errors.As(err, &api) && api.ErrorCode() == "NoSuchBucket" {
			return err
		}
		return ErrNotFound
	case http.StatusPreconditionFailed, http.StatusConflict:
		return ErrExists
	case http.StatusRequestedRangeNotSatisfiable:
		return ErrShort
	}
	return err
}

// status is the HTTP status of an S3 error answer, 0 for a transport error.
func status(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}
