// Package tests3 connects tests to the real S3 server (versitygw) that
// hack/s3-up.sh runs on 127.0.0.1.
//
// Run once per machine (or per CI job):
//
//	bash hack/s3-up.sh && source /tmp/bridge-runner-s3/env
//
// which exports BRIDGE_TEST_S3_ENDPOINT (host:port, plain HTTP),
// BRIDGE_TEST_S3_ACCESS_KEY, BRIDGE_TEST_S3_SECRET_KEY and
// BRIDGE_TEST_S3_CREDS_DIR (files accesskey and secretkey, as in a mounted
// Secret). When a variable is missing, tests that need the server are skipped
// on a developer machine but FAIL when CI is set: CI must never silently skip
// them.
package tests3

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Names of the variables that hack/s3-up.sh writes to its env file.
const (
	EnvEndpoint  = "BRIDGE_TEST_S3_ENDPOINT"
	EnvAccessKey = "BRIDGE_TEST_S3_ACCESS_KEY"
	EnvSecretKey = "BRIDGE_TEST_S3_SECRET_KEY"
	EnvCredsDir  = "BRIDGE_TEST_S3_CREDS_DIR"

	hint = "start the test S3 server with `bash hack/s3-up.sh` and `source /tmp/bridge-runner-s3/env` " +
		"(or the env file it prints)"
)

// Env returns the test server's endpoint (host:port, plain HTTP), its root
// keys, and a directory holding them as files accesskey and secretkey.
// It skips the test when the server is not configured, or fails it under CI.
func Env(t testing.TB) (endpoint, accessKey, secretKey, credsDir string) {
	t.Helper()
	vals := make([]string, 4)
	for i, name := range []string{EnvEndpoint, EnvAccessKey, EnvSecretKey, EnvCredsDir} {
		vals[i] = os.Getenv(name)
		if vals[i] != "" {
			continue
		}
		msg := "tests3: " + name + " is not set: this test needs a real S3 server; " + hint
		if os.Getenv("CI") != "" {
			t.Fatalf("%s (failing instead of skipping because CI is set)", msg)
		}
		t.Skip(msg)
	}
	return vals[0], vals[1], vals[2], vals[3]
}

// Client returns a minio-go client for the test server, authenticated as
// its root user, for arranging and inspecting test data.
func Client(t testing.TB) *minio.Client {
	t.Helper()
	endpoint, ak, sk, _ := Env(t)
	c, err := minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4(ak, sk, ""), Secure: false})
	if err != nil {
		t.Fatalf("tests3: client for %s: %v", endpoint, err)
	}
	return c
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// Bucket creates a fresh bucket named after the test with a random suffix
// and removes it, with every object in it, in t.Cleanup. prefix, if given,
// replaces the test name in the bucket's name.
func Bucket(t testing.TB, prefix ...string) string {
	t.Helper()
	c := Client(t)
	base := strings.Join(prefix, "-")
	if base == "" {
		base = t.Name()
	}
	base = strings.Trim(nonName.ReplaceAllString(strings.ToLower(base), "-"), "-")
	// Bucket names are at most 63 characters: "bt-" + base + "-" + 8 hex.
	if len(base) > 40 {
		base = strings.TrimRight(base[:40], "-")
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	name := "bt-" + base + "-" + hex.EncodeToString(suffix)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.MakeBucket(ctx, name, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("tests3: creating bucket %s: %v; is the server still running? %s", name, err, hint)
	}
	t.Cleanup(func() {
		// t.Context() is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := RemoveBucket(ctx, c, name); err != nil {
			t.Errorf("tests3: removing bucket %s: %v", name, err)
		}
	})
	return name
}

// RemoveBucket deletes every object of bucket, any unfinished multipart
// upload in it, and then the bucket. A missing bucket is not an error.
func RemoveBucket(ctx context.Context, c *minio.Client, bucket string) error {
	if ok, err := c.BucketExists(ctx, bucket); err != nil || !ok {
		return err
	}
	for up := range c.ListIncompleteUploads(ctx, bucket, "", true) {
		if up.Err != nil {
			return up.Err
		}
		if err := c.RemoveIncompleteUpload(ctx, bucket, up.Key); err != nil {
			return err
		}
	}
	objs := c.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true})
	for rerr := range c.RemoveObjects(ctx, bucket, objs, minio.RemoveObjectsOptions{}) {
		if rerr.Err != nil {
			return rerr.Err
		}
	}
	return c.RemoveBucket(ctx, bucket)
}
