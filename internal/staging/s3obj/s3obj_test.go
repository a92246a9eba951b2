package s3obj_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sagebox/sagebox/internal/objectstore"
	"github.com/sagebox/sagebox/internal/s3api"
	"github.com/sagebox/sagebox/internal/staging"
	"github.com/sagebox/sagebox/internal/staging/s3obj"
)

// newS3 serves sagebox's S3 API on loopback and returns the adapter over
// an aws-sdk-go-v2 client for it, with two-key list pages.
func newS3(t *testing.T) (*s3obj.Objects, *objectstore.Store) {
	t.Helper()
	store, err := objectstore.OpenWithOptions(filepath.Join(t.TempDir(), "s3"), objectstore.Options{NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if err := store.CreateBucket(context.Background(), "bkt"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s3api.New(store, s3api.Config{Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(srv.Close)
	client := s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
	o := s3obj.New(client)
	o.PageSize = 2
	o.TempDir = t.TempDir()
	return o, store
}

func TestListPagesAndErrors(t *testing.T) {
	o, store := newS3(t)
	ctx := context.Background()
	for i := range 5 {
		if _, err := store.Put(ctx, "bkt", fmt.Sprintf("d/k%d", i), strings.NewReader(strings.Repeat("x", i)), objectstore.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	token, pages := "", 0
	for {
		p, err := o.List(ctx, "bkt", "d/", token)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, m := range p.Objects {
			got = append(got, fmt.Sprintf("%s=%d", m.Key, m.Size))
		}
		if p.Next == "" {
			break
		}
		token = p.Next
	}
	if strings.Join(got, ",") != "d/k0=0,d/k1=1,d/k2=2,d/k3=3,d/k4=4" || pages != 3 {
		t.Errorf("listed %v in %d pages", got, pages)
	}
	if _, err := o.List(ctx, "nobkt", "", ""); !errors.Is(err, staging.ErrNoSuchBucket) {
		t.Errorf("list of a missing bucket: %v", err)
	}
	if _, _, err := o.Get(ctx, "bkt", "nope"); !errors.Is(err, staging.ErrNoSuchKey) {
		t.Errorf("get of a missing key: %v", err)
	}
	if _, _, err := o.Get(ctx, "nobkt", "x"); !errors.Is(err, staging.ErrNoSuchBucket) {
		t.Errorf("get from a missing bucket: %v", err)
	}
	if err := o.Put(ctx, "nobkt", "x", strings.NewReader("x"), staging.PutOptions{Size: 1}); !errors.Is(err, staging.ErrNoSuchBucket) {
		t.Errorf("put into a missing bucket: %v", err)
	}
}

// Put takes a stream of unknown length (a pipe, as archives are packed)
// and leaves no spool file behind.
func TestPutStream(t *testing.T) {
	o, store := newS3(t)
	ctx := context.Background()
	body := bytes.Repeat([]byte("0123456789"), 100_000)
	pr, pw := io.Pipe()
	go func() { pw.Write(body); pw.Close() }()
	if err := o.Put(ctx, "bkt", "big", pr, staging.PutOptions{Size: -1, ContentType: "application/x-tar"}); err != nil {
		t.Fatal(err)
	}
	obj, err := store.Get(ctx, "bkt", "big")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	got, _ := io.ReadAll(obj)
	if !bytes.Equal(got, body) || obj.Info.ContentType != "application/x-tar" {
		t.Errorf("stored %d bytes (%s), want %d", len(got), obj.Info.ContentType, len(body))
	}
	if left, _ := os.ReadDir(o.TempDir); len(left) != 0 {
		t.Errorf("spool files left: %v", left)
	}
}
