package s3api

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/sagebox/sagebox/internal/objectstore"
	"github.com/sagebox/sagebox/internal/sigv4"
)

// payloadRecorder remembers how request bodies arrived.
type payloadRecorder struct {
	mu   sync.Mutex
	seen map[string]int // "<method> <x-amz-content-sha256 kind> <content-encoding>"
}

func (p *payloadRecorder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sha := r.Header.Get("X-Amz-Content-Sha256")
		if len(sha) == 64 {
			sha = "hex"
		}
		p.mu.Lock()
		p.seen[fmt.Sprintf("%s %s %s", r.Method, sha, r.Header.Get("Content-Encoding"))]++
		p.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (p *payloadRecorder) saw(substr string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.seen {
		if strings.Contains(k, substr) {
			return true
		}
	}
	return false
}

func sdkClient(e *testEnv, creds aws.Credentials) *s3.Client {
	cfg := aws.Config{
		Region:           "us-east-1",
		Credentials:      credentials.StaticCredentialsProvider{Value: creds},
		HTTPClient:       e.srv.Client(),
		RetryMaxAttempts: 1,
		// What config.LoadDefaultConfig resolves to without settings.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenSupported,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenSupported,
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(e.srv.URL)
		o.UsePathStyle = true
	})
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func TestGoSDK(t *testing.T) {
	for _, tls := range []bool{false, true} {
		name := "http"
		if tls {
			name = "tls"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnvWith(t, Config{}, tls, objectstore.Options{NoSync: true})
			rec := &payloadRecorder{seen: map[string]int{}}
			e.srv.Config.Handler = rec.wrap(e.h)
			runSDKScenario(t, e, sdkClient(e, aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}), tls)
			if tls && !rec.saw("PUT STREAMING-UNSIGNED-PAYLOAD-TRAILER aws-chunked") {
				t.Errorf("over TLS the SDK was expected to send aws-chunked bodies; saw %v", rec.seen)
			}
			t.Logf("request bodies seen: %v", rec.seen)
		})
	}
}

func TestGoSDKWithAuth(t *testing.T) {
	creds := map[string]string{"AKIDSAGEBOX": "s3cr3t/+key"}
	for _, tls := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tls), func(t *testing.T) {
			e := newEnvWith(t, Config{Verifier: sigv4.NewVerifier(creds, time.Now)}, tls, objectstore.Options{NoSync: true})
			runSDKScenario(t, e, sdkClient(e, aws.Credentials{AccessKeyID: "AKIDSAGEBOX", SecretAccessKey: "s3cr3t/+key"}), tls)

			ctx := context.Background()
			_, err := sdkClient(e, aws.Credentials{AccessKeyID: "AKIDSAGEBOX", SecretAccessKey: "wrong"}).
				ListBuckets(ctx, &s3.ListBucketsInput{})
			if apiCode(err) != "SignatureDoesNotMatch" {
				t.Fatalf("wrong secret: %v", err)
			}
			_, err = sdkClient(e, aws.Credentials{AccessKeyID: "NOPE", SecretAccessKey: "x"}).
				PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("sdk-bucket"), Key: aws.String("x"), Body: strings.NewReader("x")})
			if apiCode(err) != "InvalidAccessKeyId" {
				t.Fatalf("unknown key: %v", err)
			}
		})
	}
}

func runSDKScenario(t *testing.T, e *testEnv, c *s3.Client, tls bool) {
	ctx := context.Background()
	const bucket = "sdk-bucket"
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)}); apiCode(err) != "NotFound" {
		t.Fatalf("HeadBucket before create: %v", err)
	}
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	if !errors.As(err, &owned) {
		t.Fatalf("second CreateBucket: %v", err)
	}
	hb, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)})
	if err != nil || aws.ToString(hb.BucketRegion) != "us-east-1" {
		t.Fatalf("HeadBucket: %+v %v", hb, err)
	}

	small := []byte("small object with metadata")
	put, err := c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String("dir/small file+1.txt"), Body: bytes.NewReader(small),
		ContentType: aws.String("text/plain"), Metadata: map[string]string{"purpose": "test"},
		ServerSideEncryption: types.ServerSideEncryptionAwsKms,
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`"%x"`, md5.Sum(small)); aws.ToString(put.ETag) != want {
		t.Fatalf("ETag %s, want %s", aws.ToString(put.ETag), want)
	}
	got, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("dir/small file+1.txt"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(got.Body)
	got.Body.Close()
	if err != nil || !bytes.Equal(b, small) || got.Metadata["purpose"] != "test" || aws.ToString(got.ContentType) != "text/plain" {
		t.Fatalf("GetObject: %q %v %+v", b, err, got.Metadata)
	}
	if want, _ := objectstore.ComputeChecksum(objectstore.CRC32, bytes.NewReader(small)); aws.ToString(got.ChecksumCRC32) != want {
		t.Fatalf("GetObject CRC32 %q, want %q (the SDK computes one on upload)", aws.ToString(got.ChecksumCRC32), want)
	}

	// 1 MiB object: ranged reads; over TLS sent from a non-seekable
	// reader, which makes the SDK stream aws-chunked with a trailer.
	big := randomBytes(1<<20+123, 42)
	in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("big.bin"), Body: bytes.NewReader(big)}
	if tls {
		in.Body = struct{ io.Reader }{bytes.NewReader(big)}
		in.ContentLength = aws.Int64(int64(len(big)))
	}
	if _, err := c.PutObject(ctx, in); err != nil {
		t.Fatal(err)
	}
	assertStored(t, e, bucket, "big.bin", big)
	rg, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("big.bin"), Range: aws.String("bytes=1000-1999")})
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(rg.Body)
	rg.Body.Close()
	if !bytes.Equal(b, big[1000:2000]) || aws.ToString(rg.ContentRange) != fmt.Sprintf("bytes 1000-1999/%d", len(big)) {
		t.Fatalf("ranged GET: %d bytes, Content-Range %q", len(b), aws.ToString(rg.ContentRange))
	}

	// Multipart, 9 MiB in two parts.
	mp := randomBytes(9<<20, 9)
	partsData := [][]byte{mp[:5<<20], mp[5<<20:]}
	cmu, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("multi/part.bin"), ContentType: aws.String("application/x-tar")})
	if err != nil {
		t.Fatal(err)
	}
	var completed []types.CompletedPart
	for i, p := range partsData {
		in := &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String("multi/part.bin"), UploadId: cmu.UploadId,
			PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(p)}
		if tls {
			in.Body = struct{ io.Reader }{bytes.NewReader(p)}
			in.ContentLength = aws.Int64(int64(len(p)))
		}
		up, err := c.UploadPart(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		completed = append(completed, types.CompletedPart{ETag: up.ETag, PartNumber: aws.Int32(int32(i + 1)), ChecksumCRC32: up.ChecksumCRC32})
	}
	lp, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String("multi/part.bin"), UploadId: cmu.UploadId})
	if err != nil || len(lp.Parts) != 2 {
		t.Fatalf("ListParts: %+v %v", lp, err)
	}
	done, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("multi/part.bin"),
		UploadId: cmu.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: completed}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(aws.ToString(done.ETag), `-2"`) {
		t.Fatalf("multipart ETag %s", aws.ToString(done.ETag))
	}
	assertStored(t, e, bucket, "multi/part.bin", mp)
	p2, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("multi/part.bin"), PartNumber: aws.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(p2.Body)
	p2.Body.Close()
	if !bytes.Equal(b, partsData[1]) || aws.ToInt32(p2.PartsCount) != 2 {
		t.Fatalf("GetObject partNumber=2: %d bytes, PartsCount %d", len(b), aws.ToInt32(p2.PartsCount))
	}
	ho, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("multi/part.bin")})
	if err != nil || aws.ToInt64(ho.ContentLength) != int64(len(mp)) || aws.ToString(ho.ContentType) != "application/x-tar" {
		t.Fatalf("HeadObject: %+v %v", ho, err)
	}

	// Listing with paging and a delimiter.
	for i := 0; i < 7; i++ {
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(fmt.Sprintf("list/%02d", i)), Body: strings.NewReader("x")}); err != nil {
			t.Fatal(err)
		}
	}
	var keys []string
	pager := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("list/"), MaxKeys: aws.Int32(3)})
	pages := 0
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	if len(keys) != 7 || pages != 3 || keys[0] != "list/00" || keys[6] != "list/06" {
		t.Fatalf("paged %d keys in %d pages: %v", len(keys), pages, keys)
	}
	root, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Delimiter: aws.String("/")})
	if err != nil {
		t.Fatal(err)
	}
	var cps []string
	for _, p := range root.CommonPrefixes {
		cps = append(cps, aws.ToString(p.Prefix))
	}
	if strings.Join(cps, ",") != "dir/,list/,multi/" || len(root.Contents) != 1 || aws.ToString(root.Contents[0].Key) != "big.bin" {
		t.Fatalf("root listing: prefixes %v, %d objects", cps, len(root.Contents))
	}

	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String("copy.bin"), CopySource: aws.String(bucket + "/big.bin")}); err != nil {
		t.Fatal(err)
	}
	assertStored(t, e, bucket, "copy.bin", big)

	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("missing")})
	var nsk *types.NoSuchKey
	if !errors.As(err, &nsk) {
		t.Fatalf("GetObject missing: %v", err)
	}
	if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("missing")}); apiCode(err) != "NotFound" {
		t.Fatalf("HeadObject missing: %v", err)
	}

	var ids []types.ObjectIdentifier
	for _, k := range append(keys, "dir/small file+1.txt", "big.bin", "copy.bin", "multi/part.bin") {
		ids = append(ids, types.ObjectIdentifier{Key: aws.String(k)})
	}
	del, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(bucket), Delete: &types.Delete{Objects: ids}})
	if err != nil || len(del.Deleted) != len(ids) || len(del.Errors) != 0 {
		t.Fatalf("DeleteObjects: %+v %v", del, err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("never-existed")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
}

func assertStored(t *testing.T, e *testEnv, bucket, key string, want []byte) {
	t.Helper()
	o, err := e.store.Get(context.Background(), bucket, key)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	got, err := io.ReadAll(o)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s/%s: stored %d bytes that differ from the %d sent (first bytes %q)", bucket, key, len(got), len(want), got[:min(len(got), 40)])
	}
}
