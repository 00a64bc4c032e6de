package app_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/hubproxy/hubproxy/internal/sharedstore/miniotest"
)

func listInput(prefix string) *s3.ListObjectsV2Input {
	return &s3.ListObjectsV2Input{Bucket: aws.String(miniotest.Bucket), Prefix: aws.String(prefix)}
}

func putObject(t *testing.T, m *miniotest.Server, key string, data []byte) {
	t.Helper()
	_, err := m.Client().PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(miniotest.Bucket), Key: aws.String(key), Body: bytes.NewReader(data)})
	if err != nil {
		t.Fatal(err)
	}
}

func fileHasHash(path, want string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false
	}
	return hex.EncodeToString(h.Sum(nil)) == want
}
