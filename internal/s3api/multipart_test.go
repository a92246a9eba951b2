package s3api

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"strings"
	"testing"
	"time"
)

// mpUpload starts an upload over HTTP and returns its id.
func mpUpload(t *testing.T, e *testEnv, path string, header map[string]string) string {
	t.Helper()
	r := e.call(t, "POST", path+"?uploads", nil, header)
	if r.status != 200 {
		t.Fatalf("create multipart: %d %s", r.status, r.body)
	}
	var res struct {
		Bucket, Key string
		UploadID    string `xml:"UploadId"`
	}
	if err := xml.Unmarshal([]byte(r.body), &res); err != nil || res.UploadID == "" {
		t.Fatalf("create multipart body %s: %v", r.body, err)
	}
	return res.UploadID
}

func mpPart(t *testing.T, e *testEnv, path, id string, n int, body []byte) string {
	t.Helper()
	r := e.call(t, "PUT", fmt.Sprintf("%s?partNumber=%d&uploadId=%s", path, n, id), bytes.NewReader(body), nil)
	if r.status != 200 || r.header.Get("ETag") == "" {
		t.Fatalf("upload part %d: %d %s", n, r.status, r.body)
	}
	return r.header.Get("ETag")
}

func completeDoc(parts ...any) string {
	var b strings.Builder
	b.WriteString(`<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`)
	for i := 0; i < len(parts); i += 2 {
		fmt.Fprintf(&b, "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>", parts[i], parts[i+1])
	}
	b.WriteString("</CompleteMultipartUpload>")
	return b.String()
}

func TestMultipartHTTP(t *testing.T) {
	e := newEnv(t, Config{})
	e.mkBucket(t, "bkt")
	path := "/bkt/model/model.tar.gz"
	id := mpUpload(t, e, path, map[string]string{"Content-Type": "application/gzip", "x-amz-meta-job": "j1", "x-amz-checksum-algorithm": "CRC32"})
	p1 := randomBytes(5<<20, 1)
	p2 := randomBytes(1000, 2)
	e1 := mpPart(t, e, path, id, 1, p1)
	e2 := mpPart(t, e, path, id, 2, p2)
	small := mpPart(t, e, path, id, 3, []byte("x"))

	r := e.call(t, "GET", "/bkt?uploads", nil, nil)
	if r.status != 200 || !strings.Contains(r.body, "<UploadId>"+id+"</UploadId>") || !strings.Contains(r.body, "<Key>model/model.tar.gz</Key>") {
		t.Fatalf("list uploads: %d %s", r.status, r.body)
	}
	r = e.call(t, "GET", path+"?uploadId="+id+"&max-parts=2", nil, nil)
	if r.status != 200 || !strings.Contains(r.body, "<IsTruncated>true</IsTruncated>") || !strings.Contains(r.body, "<NextPartNumberMarker>2</NextPartNumberMarker>") ||
		!strings.Contains(r.body, "<ChecksumCRC32>") {
		t.Fatalf("list parts: %d %s", r.status, r.body)
	}

	tests := []struct {
		name   string
		doc    string
		id     string
		status int
		code   string
	}{
		{"malformed", "<CompleteMultipartUpload><Part>", id, 400, "MalformedXML"},
		{"no parts", "<CompleteMultipartUpload></CompleteMultipartUpload>", id, 400, "MalformedXML"},
		{"out of order", completeDoc(2, e2, 1, e1), id, 400, "InvalidPartOrder"},
		{"wrong etag", completeDoc(1, e1, 2, `"00000000000000000000000000000000"`), id, 400, "InvalidPart"},
		{"missing part", completeDoc(1, e1, 7, e2), id, 400, "InvalidPart"},
		{"missing later part", completeDoc(3, small, 4, e2), id, 400, "InvalidPart"},
		{"small part out of order", completeDoc(1, e1, 3, small, 2, e2), id, 400, "InvalidPartOrder"},
		{"entity too small", completeDoc(2, e2, 3, small), id, 400, "EntityTooSmall"},
		{"unknown upload", completeDoc(1, e1), "nope", 404, "NoSuchUpload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.call(t, "POST", path+"?uploadId="+tt.id, strings.NewReader(tt.doc), nil)
			if r.status != tt.status || errorCode(t, r.body) != tt.code {
				t.Fatalf("%d %s", r.status, r.body)
			}
		})
	}

	r = e.call(t, "POST", path+"?uploadId="+id, strings.NewReader(completeDoc(1, e1, 2, e2)), nil)
	if r.status != 200 {
		t.Fatalf("complete: %d %s", r.status, r.body)
	}
	var res struct {
		Location, Bucket, Key, ETag, ChecksumCRC32, ChecksumType string
	}
	if err := xml.Unmarshal([]byte(r.body), &res); err != nil {
		t.Fatal(err)
	}
	if res.Bucket != "bkt" || res.Key != "model/model.tar.gz" || !strings.HasSuffix(res.ETag, `-2"`) ||
		!strings.HasSuffix(res.ChecksumCRC32, "-2") || res.ChecksumType != "COMPOSITE" || !strings.HasSuffix(res.Location, path) {
		t.Fatalf("complete result %+v", res)
	}
	assertStored(t, e, "bkt", "model/model.tar.gz", append(bytes.Clone(p1), p2...))

	// Part-number reads.
	for n, want := range map[int][]byte{1: p1, 2: p2} {
		r := e.call(t, "GET", fmt.Sprintf("%s?partNumber=%d", path, n), nil, nil)
		if r.status != 206 || r.body != string(want) || r.header.Get("x-amz-mp-parts-count") != "2" {
			t.Fatalf("partNumber=%d: %d, %d bytes, %v", n, r.status, len(r.body), r.header)
		}
	}
	r = e.call(t, "GET", path+"?partNumber=3", nil, nil)
	if r.status != 416 || errorCode(t, r.body) != "InvalidPartNumber" {
		t.Fatalf("partNumber=3: %d %s", r.status, r.body)
	}
	r = e.call(t, "GET", path+"?partNumber=1", nil, map[string]string{"Range": "bytes=0-1"})
	if r.status != 400 || errorCode(t, r.body) != "InvalidRequest" {
		t.Fatalf("partNumber with Range: %d %s", r.status, r.body)
	}
	r = e.call(t, "HEAD", path, nil, map[string]string{"x-amz-checksum-mode": "ENABLED"})
	if r.header.Get("Content-Type") != "application/gzip" || r.header.Get("x-amz-meta-job") != "j1" || !strings.HasSuffix(r.header.Get("x-amz-checksum-crc32"), "-2") {
		t.Fatalf("HEAD of the completed object: %v", r.header)
	}
	e.put(t, "bkt", "single", "whole")
	r = e.call(t, "GET", "/bkt/single?partNumber=1", nil, nil)
	if r.status != 206 || r.body != "whole" || r.header.Get("Content-Range") != "bytes 0-4/5" || r.header.Get("x-amz-mp-parts-count") != "" {
		t.Fatalf("partNumber=1 of a single-part object: %d %q %v", r.status, r.body, r.header)
	}

	// Abort.
	id = mpUpload(t, e, "/bkt/aborted", nil)
	mpPart(t, e, "/bkt/aborted", id, 1, []byte("x"))
	if r := e.call(t, "DELETE", "/bkt/aborted?uploadId="+id, nil, nil); r.status != 204 {
		t.Fatalf("abort: %d %s", r.status, r.body)
	}
	for _, m := range []string{"DELETE", "GET"} {
		if r := e.call(t, m, "/bkt/aborted?uploadId="+id, nil, nil); r.status != 404 || errorCode(t, r.body) != "NoSuchUpload" {
			t.Fatalf("%s after abort: %d %s", m, r.status, r.body)
		}
	}
	if r := e.call(t, "PUT", "/bkt/aborted?partNumber=0&uploadId="+id, strings.NewReader("x"), nil); r.status != 400 || errorCode(t, r.body) != "InvalidArgument" {
		t.Fatalf("part number 0: %d %s", r.status, r.body)
	}
	if r := e.call(t, "PUT", "/bkt/aborted?partNumber=1&uploadId="+id, nil, map[string]string{"x-amz-copy-source": "/bkt/single"}); r.status != 501 {
		t.Fatalf("UploadPartCopy: %d %s", r.status, r.body)
	}
}

// TestCompleteKeepAlive forces the slow path of CompleteMultipartUpload:
// the 200 is committed early and whitespace flows until the result or an
// error document arrives.
func TestCompleteKeepAlive(t *testing.T) {
	e := newEnv(t, Config{})
	e.h.keepAliveAfter = 20 * time.Millisecond
	e.h.beforeComplete = func() { time.Sleep(120 * time.Millisecond) }
	e.mkBucket(t, "bkt")
	id := mpUpload(t, e, "/bkt/k", nil)
	etag := mpPart(t, e, "/bkt/k", id, 1, []byte("only part"))

	r := e.call(t, "POST", "/bkt/k?uploadId="+id, strings.NewReader(completeDoc(1, `"bogus"`)), nil)
	if r.status != 200 || !strings.Contains(r.body, "<Code>InvalidPart</Code>") || !strings.Contains(r.body, "   ") {
		t.Fatalf("slow failing complete: %d %q", r.status, r.body)
	}
	r = e.call(t, "POST", "/bkt/k?uploadId="+id, strings.NewReader(completeDoc(1, etag)), nil)
	var res struct {
		XMLName xml.Name
		ETag    string
	}
	if err := xml.Unmarshal([]byte(r.body), &res); err != nil || r.status != 200 || res.XMLName.Local != "CompleteMultipartUploadResult" {
		t.Fatalf("slow complete: %d %q %v", r.status, r.body, err)
	}
	assertStored(t, e, "bkt", "k", []byte("only part"))
}
