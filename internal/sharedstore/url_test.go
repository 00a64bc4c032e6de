package sharedstore

import (
	"errors"
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	good := map[string]Location{
		"s3://bucket":                     {Scheme: "s3", Bucket: "bucket"},
		"s3://bucket/":                    {Scheme: "s3", Bucket: "bucket"},
		"s3://bucket/a/b/":                {Scheme: "s3", Bucket: "bucket", Prefix: "a/b"},
		"s3://b/p?region=eu-west-1":       {Scheme: "s3", Bucket: "b", Prefix: "p", Region: "eu-west-1"},
		"s3://b?use_path_style=true":      {Scheme: "s3", Bucket: "b", PathStyle: true},
		"s3://b?endpoint=http://m:9000/":  {Scheme: "s3", Bucket: "b", Endpoint: "http://m:9000"},
		"s3://b?endpoint=https%3A%2F%2Fx": {Scheme: "s3", Bucket: "b", Endpoint: "https://x"},
		"file:///mnt/shared":              {Scheme: "file", Dir: "/mnt/shared"},
		"file:///mnt/shared/":             {Scheme: "file", Dir: "/mnt/shared"},
		"file://localhost/mnt/x":          {Scheme: "file", Dir: "/mnt/x"},
		"file:///mnt/g?mode=group":        {Scheme: "file", Dir: "/mnt/g", Group: true},
		"file:///mnt/p?mode=private":      {Scheme: "file", Dir: "/mnt/p"},
	}
	for raw, want := range good {
		got, err := ParseURL(raw)
		if err != nil || got != want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", raw, got, err, want)
		}
		again, err := ParseURL(got.String())
		if err != nil || again != got {
			t.Errorf("%q: String() %q does not parse back: %+v %v", raw, got.String(), again, err)
		}
	}
	bad := map[string]string{
		"":                                   "no scheme",
		"/mnt/shared":                        "no scheme",
		"mnt":                                "no scheme",
		"http://x":                           "unknown scheme",
		"gs://bucket":                        "not supported",
		"azblob://container":                 "not supported",
		"s3://":                              "no bucket",
		"s3://bucket:9000":                   "not a bucket name",
		"s3://key:secret@bucket":             "credentials do not go in the URL",
		"s3://b?endpoint=minio:9000":         "endpoint",
		"s3://b?endpoint=":                   "endpoint",
		"s3://b?use_path_style=yes":          "use_path_style",
		"s3://b?region=":                     "region is empty",
		"s3://b?s3ForcePathStyle=true":       `unknown query key "s3ForcePathStyle"`,
		"s3://b?region=a&region=b":           "2 times",
		"s3://b/a/../c":                      "not a clean path",
		"file://mnt/shared":                  "three slashes",
		"file:///mnt?x=1":                    `unknown query key "x"`,
		"file:///mnt?mode=0777":              "would let other users",
		"file:///mnt?mode=0664":              "would let other users",
		"file:///mnt?mode=0770":              "want mode=group",
		"file:///mnt?mode=world":             "want mode=group",
		"file:///mnt?mode=":                  "want mode=group",
		"file:///mnt?mode=group&mode=group":  "2 times",
		"file:///mnt?mode=group#x":           "unexpected #x",
		"file:relative":                      "absolute",
		"s3://b?endpoint=http://u:pw@m:9000": "credentials do not go in the endpoint",
	}
	for raw, want := range bad {
		_, err := ParseURL(raw)
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "pw@") {
			t.Errorf("ParseURL(%q) = %v; want a ConfigError saying %q", raw, err, want)
		}
	}
}
