package objectstore

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// partBody returns n bytes that differ per part.
func partBody(part, n int) []byte {
	return bytes.Repeat([]byte{byte('a' + part%26)}, n)
}

// multipartETag computes the S3 multipart ETag independently.
func multipartETag(parts ...[]byte) string {
	var cat []byte
	for _, p := range parts {
		s := md5.Sum(p)
		cat = append(cat, s[:]...)
	}
	s := md5.Sum(cat)
	return fmt.Sprintf(`"%s-%d"`, hex.EncodeToString(s[:]), len(parts))
}

func TestMultipartUpload(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	mustBucket(t, s, "bkt")
	up, err := s.CreateMultipart(ctx, "bkt", "big", MultipartOptions{
		ContentType: "application/x-tar", UserMetadata: map[string]string{"job": "j1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	bodies := [][]byte{partBody(1, MinPartSize), partBody(2, MinPartSize+17), partBody(3, 1234)}
	var complete []CompletePart
	for i, b := range bodies {
		p, err := s.UploadPart(ctx, "bkt", "big", up.ID, i+1, bytes.NewReader(b), Integrity{})
		if err != nil {
			t.Fatal(err)
		}
		if p.ETag != md5ETag(string(b)) || p.Size != int64(len(b)) {
			t.Fatalf("part %d info %+v", i+1, p)
		}
		complete = append(complete, CompletePart{Number: i + 1, ETag: p.ETag})
	}
	// Re-uploading a part replaces it; the old file goes away.
	if _, err := s.UploadPart(ctx, "bkt", "big", up.ID, 3, bytes.NewReader(bodies[2]), Integrity{}); err != nil {
		t.Fatal(err)
	}
	// A part that is uploaded but not listed is discarded.
	if _, err := s.UploadPart(ctx, "bkt", "big", up.ID, 9, strings.NewReader("stray"), Integrity{}); err != nil {
		t.Fatal(err)
	}
	lp, err := s.ListParts(ctx, "bkt", "big", up.ID, 0, 2)
	if err != nil || len(lp.Parts) != 2 || !lp.IsTruncated || lp.NextMarker != 2 {
		t.Fatalf("ListParts page 1 = %+v, %v", lp, err)
	}
	lp, err = s.ListParts(ctx, "bkt", "big", up.ID, 2, 2)
	if err != nil || len(lp.Parts) != 2 || lp.IsTruncated || lp.Parts[1].Number != 9 {
		t.Fatalf("ListParts page 2 = %+v, %v", lp, err)
	}
	ups, trunc, err := s.ListUploads(ctx, "bkt", "bi", 0)
	if err != nil || len(ups) != 1 || trunc || ups[0].ID != up.ID || ups[0].Key != "big" {
		t.Fatalf("ListUploads = %+v, %v, %v", ups, trunc, err)
	}

	info, err := s.CompleteMultipart(ctx, "bkt", "big", up.ID, complete)
	if err != nil {
		t.Fatal(err)
	}
	if want := multipartETag(bodies...); info.ETag != want {
		t.Fatalf("ETag %s, want %s", info.ETag, want)
	}
	whole := bytes.Join(bodies, nil)
	if got := mustGet(t, s, "bkt", "big"); got != string(whole) {
		t.Fatalf("assembled object differs (%d bytes, want %d)", len(got), len(whole))
	}
	st, err := s.Stat(ctx, "bkt", "big")
	if err != nil {
		t.Fatal(err)
	}
	if st.ContentType != "application/x-tar" || st.UserMetadata["job"] != "j1" || st.PartsCount() != 3 || st.Size != int64(len(whole)) {
		t.Fatalf("Stat = %+v", st)
	}
	off, n, ok := st.PartRange(2)
	if !ok || off != MinPartSize || n != MinPartSize+17 {
		t.Fatalf("PartRange(2) = %d, %d, %v", off, n, ok)
	}
	if _, _, ok := st.PartRange(4); ok {
		t.Fatal("PartRange(4) of a 3-part object")
	}
	if data, tmp := dataFiles(t, s); data != 1 || tmp != 0 {
		t.Fatalf("data=%d tmp=%d after complete", data, tmp)
	}
	if _, err := s.CompleteMultipart(ctx, "bkt", "big", up.ID, complete); !errors.Is(err, ErrNoSuchUpload) {
		t.Fatalf("second complete = %v", err)
	}
	if ups, _, _ := s.ListUploads(ctx, "bkt", "", 0); len(ups) != 0 {
		t.Fatalf("uploads after complete: %+v", ups)
	}
}

func TestMultipartValidation(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	mustBucket(t, s, "bkt")
	up, err := s.CreateMultipart(ctx, "bkt", "k", MultipartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	small, err := s.UploadPart(ctx, "bkt", "k", up.ID, 1, strings.NewReader("tiny"), Integrity{})
	if err != nil {
		t.Fatal(err)
	}
	big := partBody(2, MinPartSize)
	p2, err := s.UploadPart(ctx, "bkt", "k", up.ID, 2, bytes.NewReader(big), Integrity{})
	if err != nil {
		t.Fatal(err)
	}
	p3, err := s.UploadPart(ctx, "bkt", "k", up.ID, 3, strings.NewReader("last"), Integrity{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		parts []CompletePart
		want  error
	}{
		{"no parts", nil, ErrInvalidPart},
		{"descending", []CompletePart{{2, p2.ETag, Checksums{}}, {1, small.ETag, Checksums{}}}, ErrInvalidPartOrder},
		{"duplicate", []CompletePart{{2, p2.ETag, Checksums{}}, {2, p2.ETag, Checksums{}}}, ErrInvalidPartOrder},
		{"missing part", []CompletePart{{2, p2.ETag, Checksums{}}, {4, p3.ETag, Checksums{}}}, ErrInvalidPart},
		{"wrong etag", []CompletePart{{2, `"00000000000000000000000000000000"`, Checksums{}}}, ErrInvalidPart},
		{"wrong part checksum", []CompletePart{{2, p2.ETag, Checksums{CRC32: "AAAAAA=="}}}, ErrInvalidPart},
		{"small part not last", []CompletePart{{1, small.ETag, Checksums{}}, {2, p2.ETag, Checksums{}}}, ErrEntityTooSmall},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.CompleteMultipart(ctx, "bkt", "k", up.ID, tt.parts); !errors.Is(err, tt.want) {
				t.Fatalf("complete = %v, want %v", err, tt.want)
			}
		})
	}
	for _, n := range []int{0, MaxPartNumber + 1} {
		if _, err := s.UploadPart(ctx, "bkt", "k", up.ID, n, strings.NewReader("x"), Integrity{}); !errors.Is(err, ErrInvalidPartNumber) {
			t.Fatalf("part number %d: %v", n, err)
		}
	}
	if _, err := s.UploadPart(ctx, "bkt", "other-key", up.ID, 1, strings.NewReader("x"), Integrity{}); !errors.Is(err, ErrNoSuchUpload) {
		t.Fatalf("upload id used with another key: %v", err)
	}
	if _, err := s.UploadPart(ctx, "bkt", "k", "nope", 1, strings.NewReader("x"), Integrity{}); !errors.Is(err, ErrNoSuchUpload) {
		t.Fatalf("unknown upload id: %v", err)
	}
	if _, err := s.UploadPart(ctx, "nob", "k", up.ID, 1, strings.NewReader("x"), Integrity{}); !errors.Is(err, ErrNoSuchBucket) {
		t.Fatalf("unknown bucket: %v", err)
	}
	// Complete still works after the failed attempts.
	info, err := s.CompleteMultipart(ctx, "bkt", "k", up.ID, []CompletePart{{2, p2.ETag, Checksums{}}, {3, p3.ETag, Checksums{}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := multipartETag(big, []byte("last")); info.ETag != want {
		t.Fatalf("ETag %s, want %s", info.ETag, want)
	}
	if data, _ := dataFiles(t, s); data != 1 {
		t.Fatalf("%d data files after complete, want 1", data)
	}
}

func TestMultipartAbort(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	mustBucket(t, s, "bkt")
	up, err := s.CreateMultipart(ctx, "bkt", "k", MultipartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		if _, err := s.UploadPart(ctx, "bkt", "k", up.ID, i, strings.NewReader("part"), Integrity{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AbortMultipart(ctx, "bkt", "k", up.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.AbortMultipart(ctx, "bkt", "k", up.ID); !errors.Is(err, ErrNoSuchUpload) {
		t.Fatalf("second abort = %v", err)
	}
	if _, err := s.UploadPart(ctx, "bkt", "k", up.ID, 1, strings.NewReader("x"), Integrity{}); !errors.Is(err, ErrNoSuchUpload) {
		t.Fatalf("upload after abort = %v", err)
	}
	if data, tmp := dataFiles(t, s); data != 0 || tmp != 0 {
		t.Fatalf("data=%d tmp=%d after abort", data, tmp)
	}
	if _, err := s.Stat(ctx, "bkt", "k"); !errors.Is(err, ErrNoSuchKey) {
		t.Fatalf("aborted upload created an object: %v", err)
	}
}

func TestMultipartChecksums(t *testing.T) {
	ctx := context.Background()
	parts := [][]byte{partBody(1, MinPartSize), partBody(2, 100)}
	whole := bytes.Join(parts, nil)
	tests := []struct {
		name string
		alg  ChecksumAlgorithm
		typ  string
		want func(t *testing.T, partSums []string) string
	}{
		{"crc32 composite", CRC32, "", func(t *testing.T, ps []string) string {
			v, err := compositeChecksum(CRC32, ps)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}},
		{"sha256 composite", SHA256, ChecksumTypeComposite, func(t *testing.T, ps []string) string {
			v, _ := compositeChecksum(SHA256, ps)
			return v
		}},
		{"crc32c full object", CRC32C, ChecksumTypeFullObject, func(t *testing.T, _ []string) string {
			v, _ := ComputeChecksum(CRC32C, bytes.NewReader(whole))
			return v
		}},
		{"crc64nvme defaults to full object", CRC64NVME, "", func(t *testing.T, _ []string) string {
			v, _ := ComputeChecksum(CRC64NVME, bytes.NewReader(whole))
			return v
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestStore(t)
			mustBucket(t, s, "bkt")
			up, err := s.CreateMultipart(ctx, "bkt", "k", MultipartOptions{ChecksumAlgorithm: tt.alg, ChecksumType: tt.typ})
			if err != nil {
				t.Fatal(err)
			}
			var cps []CompletePart
			var sums []string
			for i, b := range parts {
				want, _ := ComputeChecksum(tt.alg, bytes.NewReader(b))
				// The client may or may not send the part checksum; both work.
				in := Integrity{}
				if i == 0 {
					in.Checksums.Set(tt.alg, want)
				}
				p, err := s.UploadPart(ctx, "bkt", "k", up.ID, i+1, bytes.NewReader(b), in)
				if err != nil {
					t.Fatal(err)
				}
				if got := p.Checksums.Get(tt.alg); got != want {
					t.Fatalf("part %d %s = %s, want %s", i+1, tt.alg, got, want)
				}
				cp := CompletePart{Number: i + 1, ETag: p.ETag}
				cp.Checksums.Set(tt.alg, want)
				cps = append(cps, cp)
				sums = append(sums, want)
			}
			info, err := s.CompleteMultipart(ctx, "bkt", "k", up.ID, cps)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want(t, sums)
			st, _ := s.Stat(ctx, "bkt", "k")
			if info.Checksums.Get(tt.alg) != want || st.Checksums.Get(tt.alg) != want {
				t.Fatalf("object %s = %s / %s, want %s", tt.alg, info.Checksums.Get(tt.alg), st.Checksums.Get(tt.alg), want)
			}
			if got := mustGet(t, s, "bkt", "k"); got != string(whole) {
				t.Fatal("assembled object differs")
			}
		})
	}
	s := newTestStore(t)
	mustBucket(t, s, "bkt")
	if _, err := s.CreateMultipart(ctx, "bkt", "k", MultipartOptions{ChecksumAlgorithm: SHA1, ChecksumType: ChecksumTypeFullObject}); !errors.Is(err, ErrInvalidChecksum) {
		t.Fatalf("SHA1 full-object checksum accepted: %v", err)
	}
}

func TestMultipartSinglePartReusesFile(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	mustBucket(t, s, "bkt")
	mustPut(t, s, "bkt", "k", "previous version")
	up, err := s.CreateMultipart(ctx, "bkt", "k", MultipartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.UploadPart(ctx, "bkt", "k", up.ID, 1, strings.NewReader("only part"), Integrity{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.CompleteMultipart(ctx, "bkt", "k", up.ID, []CompletePart{{Number: 1, ETag: p.ETag}})
	if err != nil {
		t.Fatal(err)
	}
	if info.ETag != multipartETag([]byte("only part")) || info.PartsCount() != 1 {
		t.Fatalf("info = %+v", info)
	}
	o, err := s.Get(ctx, "bkt", "k")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(o)
	o.Close()
	if string(b) != "only part" {
		t.Fatalf("Get = %q", b)
	}
	if data, _ := dataFiles(t, s); data != 1 {
		t.Fatalf("%d data files, want 1", data)
	}
}
