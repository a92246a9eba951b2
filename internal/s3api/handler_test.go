package s3api

import (
	"context"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sagebox/sagebox/internal/objectstore"
)

func TestBucketOperations(t *testing.T) {
	e := newEnv(t, Config{Region: "eu-central-1"})
	e.mkBucket(t, "existing")
	e.put(t, "existing", "k", "v")
	e.mkBucket(t, "empty-one")
	tests := []struct {
		name    string
		method  string
		path    string
		body    string
		header  map[string]string
		status  int
		code    string // S3 error code, "" for success
		noBody  bool
		checkFn func(t *testing.T, r response)
	}{
		{name: "create", method: "PUT", path: "/new-bucket", status: 200, checkFn: func(t *testing.T, r response) {
			if r.header.Get("Location") != "/new-bucket" {
				t.Errorf("Location %q", r.header.Get("Location"))
			}
		}},
		{name: "create with location constraint", method: "PUT", path: "/west-bucket", status: 200,
			body: `<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><LocationConstraint>us-west-2</LocationConstraint></CreateBucketConfiguration>`},
		{name: "create with bad xml", method: "PUT", path: "/xml-bucket", body: "<oops", status: 400, code: "MalformedXML"},
		{name: "create existing", method: "PUT", path: "/existing", status: 409, code: "BucketAlreadyOwnedByYou"},
		{name: "create invalid name", method: "PUT", path: "/Bad_Name", status: 400, code: "InvalidBucketName"},
		{name: "create reserved", method: "PUT", path: "/_sagebox", status: 400, code: "InvalidBucketName"},
		{name: "head existing", method: "HEAD", path: "/existing", status: 200, noBody: true, checkFn: func(t *testing.T, r response) {
			if r.header.Get("x-amz-bucket-region") != "eu-central-1" {
				t.Errorf("x-amz-bucket-region %q", r.header.Get("x-amz-bucket-region"))
			}
		}},
		{name: "head missing has no body", method: "HEAD", path: "/missing", status: 404, noBody: true},
		{name: "delete not empty", method: "DELETE", path: "/existing", status: 409, code: "BucketNotEmpty"},
		{name: "delete missing", method: "DELETE", path: "/missing", status: 404, code: "NoSuchBucket"},
		{name: "delete empty", method: "DELETE", path: "/empty-one", status: 204},
		{name: "location", method: "GET", path: "/existing?location", status: 200, checkFn: func(t *testing.T, r response) {
			if !strings.Contains(r.body, ">eu-central-1</LocationConstraint>") {
				t.Errorf("location body %s", r.body)
			}
		}},
		{name: "versioning", method: "GET", path: "/existing?versioning", status: 200},
		{name: "unsupported subresource", method: "GET", path: "/existing?policy", status: 501, code: "NotImplemented"},
		{name: "list objects of missing bucket", method: "GET", path: "/missing?list-type=2", status: 404, code: "NoSuchBucket"},
		{name: "post to bucket without delete", method: "POST", path: "/existing", status: 405, code: "MethodNotAllowed"},
		{name: "put to service", method: "PUT", path: "/", status: 405, code: "MethodNotAllowed"},
		{name: "expected owner accepted", method: "HEAD", path: "/existing", header: map[string]string{"x-amz-expected-bucket-owner": "123456789012"}, status: 200, noBody: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.call(t, tt.method, tt.path, strings.NewReader(tt.body), tt.header)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			if r.header.Get("x-amz-request-id") == "" || r.header.Get("x-amz-id-2") == "" {
				t.Errorf("missing request id headers: %v", r.header)
			}
			if tt.noBody && r.body != "" {
				t.Errorf("body on %s: %q", tt.method, r.body)
			}
			if tt.code != "" {
				if got := errorCode(t, r.body); got != tt.code {
					t.Fatalf("code %s, want %s", got, tt.code)
				}
				if ct := r.header.Get("Content-Type"); ct != "application/xml" {
					t.Errorf("error Content-Type %q", ct)
				}
			}
			if tt.checkFn != nil {
				tt.checkFn(t, r)
			}
		})
	}
}

func TestExpectedBucketOwner(t *testing.T) {
	e := newEnv(t, Config{AccountID: "111122223333"})
	e.mkBucket(t, "owned")
	r := e.call(t, "HEAD", "/owned", nil, map[string]string{"x-amz-expected-bucket-owner": "999999999999"})
	if r.status != 403 {
		t.Fatalf("wrong owner: %d", r.status)
	}
	r = e.call(t, "GET", "/owned/k", nil, map[string]string{"x-amz-expected-bucket-owner": "999999999999"})
	if r.status != 403 || errorCode(t, r.body) != "AccessDenied" {
		t.Fatalf("wrong owner on object: %d %s", r.status, r.body)
	}
	if r := e.call(t, "HEAD", "/owned", nil, map[string]string{"x-amz-expected-bucket-owner": "111122223333"}); r.status != 200 {
		t.Fatalf("right owner: %d", r.status)
	}
}

func TestListBucketsXML(t *testing.T) {
	e := newEnv(t, Config{})
	for _, b := range []string{"bbb", "aaa", "ccc"} {
		e.mkBucket(t, b)
	}
	r := e.call(t, "GET", "/", nil, nil)
	if r.status != 200 || r.header.Get("Content-Type") != "application/xml" {
		t.Fatalf("status %d, %v", r.status, r.header)
	}
	var doc struct {
		XMLName xml.Name `xml:"ListAllMyBucketsResult"`
		Owner   struct{ ID string }
		Buckets []struct {
			Name, CreationDate string
		} `xml:"Buckets>Bucket"`
	}
	if err := xml.Unmarshal([]byte(r.body), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Buckets) != 3 || doc.Buckets[0].Name != "aaa" || doc.Owner.ID == "" {
		t.Fatalf("%+v", doc)
	}
	if _, err := time.Parse(timeFormat, doc.Buckets[0].CreationDate); err != nil {
		t.Fatalf("CreationDate %q: %v", doc.Buckets[0].CreationDate, err)
	}
	// Paging with max-buckets.
	r = e.call(t, "GET", "/?max-buckets=2", nil, nil)
	if !strings.Contains(r.body, "<Name>bbb</Name>") || strings.Contains(r.body, "ccc") || !strings.Contains(r.body, "<ContinuationToken>") {
		t.Fatalf("page 1: %s", r.body)
	}
}

func TestObjectRoundTrip(t *testing.T) {
	e := newEnv(t, Config{})
	e.mkBucket(t, "bkt")
	key := "dir/a b+c%d ü?#.txt"
	path := "/bkt/" + strings.ReplaceAll(url.PathEscape(key), "+", "%2B")
	r := e.call(t, "PUT", path, strings.NewReader("hello world"), map[string]string{
		"Content-Type":                 "text/plain",
		"Cache-Control":                "max-age=60",
		"x-amz-meta-Owner":             "alice",
		"Content-MD5":                  md5b64("hello world"),
		"x-amz-server-side-encryption": "aws:kms",
	})
	if r.status != 200 || r.header.Get("ETag") != `"`+md5hex("hello world")+`"` {
		t.Fatalf("put: %d %v %s", r.status, r.header, r.body)
	}
	if r.header.Get("x-amz-server-side-encryption") != "aws:kms" {
		t.Errorf("SSE not echoed")
	}
	if _, err := e.store.Stat(context.Background(), "bkt", key); err != nil {
		t.Fatalf("stored under another key: %v", err)
	}
	for _, method := range []string{"GET", "HEAD"} {
		r = e.call(t, method, path, nil, nil)
		want := map[string]string{
			"ETag":                         `"` + md5hex("hello world") + `"`,
			"Content-Type":                 "text/plain",
			"Content-Length":               "11",
			"Cache-Control":                "max-age=60",
			"Accept-Ranges":                "bytes",
			"X-Amz-Meta-Owner":             "alice",
			"X-Amz-Server-Side-Encryption": "aws:kms",
		}
		for k, v := range want {
			if got := r.header.Get(k); got != v {
				t.Errorf("%s %s = %q, want %q", method, k, got, v)
			}
		}
		if lm, err := http.ParseTime(r.header.Get("Last-Modified")); err != nil || time.Since(lm) > time.Minute ||
			!strings.HasSuffix(r.header.Get("Last-Modified"), " GMT") {
			t.Errorf("Last-Modified %q", r.header.Get("Last-Modified"))
		}
		if method == "GET" && r.body != "hello world" {
			t.Errorf("GET body %q", r.body)
		}
		if method == "HEAD" && r.body != "" {
			t.Errorf("HEAD body %q", r.body)
		}
	}
	r = e.call(t, "GET", path+"?response-content-type=application/json&response-content-disposition=attachment", nil, nil)
	if r.header.Get("Content-Type") != "application/json" || r.header.Get("Content-Disposition") != "attachment" {
		t.Errorf("response overrides ignored: %v", r.header)
	}
	if r = e.call(t, "DELETE", path, nil, nil); r.status != 204 {
		t.Fatalf("delete: %d", r.status)
	}
	if r = e.call(t, "DELETE", path, nil, nil); r.status != 204 {
		t.Fatalf("delete missing: %d", r.status)
	}
	r = e.call(t, "GET", path, nil, nil)
	if r.status != 404 || errorCode(t, r.body) != "NoSuchKey" || !strings.Contains(r.body, "<Key>"+key+"</Key>") {
		t.Fatalf("get deleted: %d %s", r.status, r.body)
	}
	if r = e.call(t, "HEAD", path, nil, nil); r.status != 404 || r.body != "" {
		t.Fatalf("head deleted: %d %q", r.status, r.body)
	}
	if r = e.call(t, "PUT", "/nobucket/k", strings.NewReader("x"), nil); r.status != 404 || errorCode(t, r.body) != "NoSuchBucket" {
		t.Fatalf("put to missing bucket: %d %s", r.status, r.body)
	}
}

func TestVirtualHostStyle(t *testing.T) {
	e := newEnv(t, Config{VirtualHostDomains: []string{"localhost", "s3.sagebox.test"}})
	e.mkBucket(t, "vbucket")
	e.mkBucket(t, "dotted.bucket")
	host := strings.TrimPrefix(e.srv.URL, "http://")
	_, port, _ := strings.Cut(host, ":")
	r := e.call(t, "PUT", "/path/to/key", strings.NewReader("virtual"), map[string]string{"Host": "vbucket.localhost:" + port})
	if r.status != 200 {
		t.Fatalf("virtual put: %d %s", r.status, r.body)
	}
	if got := e.call(t, "GET", "/vbucket/path/to/key", nil, nil); got.body != "virtual" {
		t.Fatalf("path-style read of a virtual-host write: %d %q", got.status, got.body)
	}
	r = e.call(t, "GET", "/?list-type=2", nil, map[string]string{"Host": "vbucket.LOCALHOST:" + port})
	if !strings.Contains(r.body, "<Key>path/to/key</Key>") {
		t.Fatalf("virtual list: %s", r.body)
	}
	r = e.call(t, "HEAD", "/", nil, map[string]string{"Host": "dotted.bucket.s3.sagebox.test"})
	if r.status != 200 {
		t.Fatalf("dotted virtual head: %d", r.status)
	}
	// A bare base domain is path-style.
	r = e.call(t, "GET", "/vbucket/path/to/key", nil, map[string]string{"Host": "localhost:" + port})
	if r.body != "virtual" {
		t.Fatalf("path-style on the base domain: %d %q", r.status, r.body)
	}
}

func TestRangeRequests(t *testing.T) {
	e := newEnv(t, Config{})
	e.mkBucket(t, "bkt")
	e.put(t, "bkt", "digits", "0123456789")
	e.put(t, "bkt", "empty", "")
	tests := []struct {
		key, rng string
		status   int
		body     string
		cr       string
	}{
		{"digits", "bytes=0-3", 206, "0123", "bytes 0-3/10"},
		{"digits", "bytes=5-", 206, "56789", "bytes 5-9/10"},
		{"digits", "bytes=-3", 206, "789", "bytes 7-9/10"},
		{"digits", "bytes=8-100", 206, "89", "bytes 8-9/10"},
		{"digits", "bytes=-100", 206, "0123456789", "bytes 0-9/10"},
		{"digits", "bytes=9-9", 206, "9", "bytes 9-9/10"},
		{"digits", "bytes=10-", 416, "", "bytes */10"},
		{"digits", "bytes=-0", 416, "", "bytes */10"},
		{"digits", "bytes=3-1", 200, "0123456789", ""},
		{"digits", "bytes=0-1,4-5", 200, "0123456789", ""},
		{"digits", "lines=0-1", 200, "0123456789", ""},
		{"digits", "bytes=abc", 200, "0123456789", ""},
		{"empty", "bytes=0-", 416, "", "bytes */0"},
	}
	for _, tt := range tests {
		t.Run(tt.key+" "+tt.rng, func(t *testing.T) {
			r := e.call(t, "GET", "/bkt/"+tt.key, nil, map[string]string{"Range": tt.rng})
			if r.status != tt.status {
				t.Fatalf("status %d, want %d (%s)", r.status, tt.status, r.body)
			}
			if r.header.Get("Content-Range") != tt.cr {
				t.Errorf("Content-Range %q, want %q", r.header.Get("Content-Range"), tt.cr)
			}
			if tt.status == 416 {
				if errorCode(t, r.body) != "InvalidRange" {
					t.Errorf("416 body %s", r.body)
				}
				return
			}
			if r.body != tt.body {
				t.Errorf("body %q, want %q", r.body, tt.body)
			}
			if fmt.Sprint(len(tt.body)) != r.header.Get("Content-Length") {
				t.Errorf("Content-Length %s for %d bytes", r.header.Get("Content-Length"), len(tt.body))
			}
		})
	}
	// HEAD with a range reports the range without a body.
	r := e.call(t, "HEAD", "/bkt/digits", nil, map[string]string{"Range": "bytes=2-4"})
	if r.status != 206 || r.header.Get("Content-Length") != "3" || r.header.Get("Content-Range") != "bytes 2-4/10" {
		t.Fatalf("HEAD range: %d %v", r.status, r.header)
	}
}

func TestConditionalRequests(t *testing.T) {
	e := newEnv(t, Config{})
	e.mkBucket(t, "bkt")
	e.put(t, "bkt", "k", "data")
	etag := `"` + md5hex("data") + `"`
	past := time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)
	future := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	tests := []struct {
		name   string
		header map[string]string
		status int
	}{
		{"if-match right", map[string]string{"If-Match": etag}, 200},
		{"if-match star", map[string]string{"If-Match": "*"}, 200},
		{"if-match list", map[string]string{"If-Match": `"nope", ` + etag}, 200},
		{"if-match wrong", map[string]string{"If-Match": `"nope"`}, 412},
		{"if-none-match right", map[string]string{"If-None-Match": etag}, 304},
		{"if-none-match wrong", map[string]string{"If-None-Match": `"nope"`}, 200},
		{"if-modified-since past", map[string]string{"If-Modified-Since": past}, 200},
		{"if-modified-since future", map[string]string{"If-Modified-Since": future}, 304},
		{"if-unmodified-since past", map[string]string{"If-Unmodified-Since": past}, 412},
		{"if-unmodified-since future", map[string]string{"If-Unmodified-Since": future}, 200},
		{"if-match wins over if-unmodified-since", map[string]string{"If-Match": etag, "If-Unmodified-Since": past}, 200},
		{"if-none-match wins over if-modified-since", map[string]string{"If-None-Match": `"nope"`, "If-Modified-Since": future}, 200},
		{"bad date ignored", map[string]string{"If-Modified-Since": "yesterday"}, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, m := range []string{"GET", "HEAD"} {
				r := e.call(t, m, "/bkt/k", nil, tt.header)
				if r.status != tt.status {
					t.Fatalf("%s: status %d, want %d", m, r.status, tt.status)
				}
				if tt.status == 304 && (r.header.Get("ETag") != etag || r.body != "") {
					t.Fatalf("304 headers %v body %q", r.header, r.body)
				}
				if tt.status == 412 && m == "GET" && errorCode(t, r.body) != "PreconditionFailed" {
					t.Fatalf("412 body %s", r.body)
				}
			}
		})
	}
	// Conditional PUT: create only if absent.
	if r := e.call(t, "PUT", "/bkt/k", strings.NewReader("new"), map[string]string{"If-None-Match": "*"}); r.status != 412 {
		t.Fatalf("If-None-Match * on existing key: %d", r.status)
	}
	if r := e.call(t, "PUT", "/bkt/fresh", strings.NewReader("new"), map[string]string{"If-None-Match": "*"}); r.status != 200 {
		t.Fatalf("If-None-Match * on a new key: %d", r.status)
	}
}

func TestPutIntegrityErrors(t *testing.T) {
	e := newEnv(t, Config{})
	e.mkBucket(t, "bkt")
	body := "integrity matters"
	crc, _ := objectstore.ComputeChecksum(objectstore.CRC32, strings.NewReader(body))
	tests := []struct {
		name   string
		header map[string]string
		status int
		code   string
	}{
		{"content-md5 right", map[string]string{"Content-MD5": md5b64(body)}, 200, ""},
		{"content-md5 wrong", map[string]string{"Content-MD5": md5b64("other")}, 400, "BadDigest"},
		{"content-md5 malformed", map[string]string{"Content-MD5": "zzz"}, 400, "InvalidDigest"},
		{"content-sha256 wrong", map[string]string{"x-amz-content-sha256": strings.Repeat("ab", 32)}, 400, "XAmzContentSHA256Mismatch"},
		{"content-sha256 garbage", map[string]string{"x-amz-content-sha256": "nothex"}, 400, "InvalidArgument"},
		{"crc32 right", map[string]string{"x-amz-checksum-crc32": crc, "x-amz-sdk-checksum-algorithm": "CRC32"}, 200, ""},
		{"crc32 wrong", map[string]string{"x-amz-checksum-crc32": "AAAAAA=="}, 400, "BadDigest"},
		{"crc32 malformed", map[string]string{"x-amz-checksum-crc32": "!!"}, 400, "InvalidRequest"},
		{"sha256 checksum wrong", map[string]string{"x-amz-checksum-sha256": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}, 400, "BadDigest"},
		{"unknown algorithm", map[string]string{"x-amz-sdk-checksum-algorithm": "MD4"}, 400, "InvalidRequest"},
		{"metadata too large", map[string]string{"x-amz-meta-big": strings.Repeat("x", 3000)}, 400, "MetadataTooLarge"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := fmt.Sprintf("k%d", i)
			r := e.call(t, "PUT", "/bkt/"+key, strings.NewReader(body), tt.header)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			_, err := e.store.Stat(context.Background(), "bkt", key)
			if tt.code != "" {
				if got := errorCode(t, r.body); got != tt.code {
					t.Fatalf("code %s, want %s", got, tt.code)
				}
				if err == nil {
					t.Fatal("object stored despite the error")
				}
			} else if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestChecksumMode(t *testing.T) {
	e := newEnv(t, Config{})
	e.mkBucket(t, "bkt")
	body := "checksummed"
	crc, _ := objectstore.ComputeChecksum(objectstore.CRC32, strings.NewReader(body))
	r := e.call(t, "PUT", "/bkt/k", strings.NewReader(body), map[string]string{"x-amz-checksum-crc32": crc})
	if r.status != 200 || r.header.Get("x-amz-checksum-crc32") != crc {
		t.Fatalf("put: %d %v", r.status, r.header)
	}
	if r := e.call(t, "GET", "/bkt/k", nil, nil); r.header.Get("x-amz-checksum-crc32") != "" {
		t.Fatal("checksum returned without x-amz-checksum-mode")
	}
	for _, m := range []string{"GET", "HEAD"} {
		r := e.call(t, m, "/bkt/k", nil, map[string]string{"x-amz-checksum-mode": "ENABLED"})
		if r.header.Get("x-amz-checksum-crc32") != crc || r.header.Get("x-amz-checksum-type") != "FULL_OBJECT" {
			t.Fatalf("%s with checksum mode: %v", m, r.header)
		}
	}
	// A range is not the object: no checksum for it.
	r = e.call(t, "GET", "/bkt/k", nil, map[string]string{"x-amz-checksum-mode": "ENABLED", "Range": "bytes=0-1"})
	if r.header.Get("x-amz-checksum-crc32") != "" {
		t.Fatal("whole-object checksum sent with a range")
	}
}

func TestListObjectsV2XML(t *testing.T) {
	e := newEnv(t, Config{})
	e.mkBucket(t, "bkt")
	for _, k := range []string{"a b/1", "a b/2", "a+b", "c%d", "dir/x", "top"} {
		e.put(t, "bkt", k, k)
	}
	type result struct {
		Name, Prefix, Delimiter, EncodingType, StartAfter, ContinuationToken, NextContinuationToken string
		KeyCount, MaxKeys                                                                           int
		IsTruncated                                                                                 bool
		Contents                                                                                    []struct {
			Key, ETag, LastModified, StorageClass string
			Size                                  int64
			Owner                                 *struct{ ID string }
		}
		CommonPrefixes []struct{ Prefix string }
	}
	list := func(t *testing.T, query string) result {
		t.Helper()
		r := e.call(t, "GET", "/bkt?"+query, nil, nil)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", query, r.status, r.body)
		}
		var res result
		if err := xml.Unmarshal([]byte(r.body), &res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := list(t, "list-type=2&delimiter=/&encoding-type=url&fetch-owner=true")
	if res.EncodingType != "url" || res.Delimiter != "/" || res.KeyCount != 5 || res.MaxKeys != 1000 || res.Name != "bkt" {
		t.Fatalf("header fields: %+v", res)
	}
	var keys []string
	for _, c := range res.Contents {
		k, _ := url.QueryUnescape(c.Key)
		keys = append(keys, k)
		if c.ETag != `"`+md5hex(k)+`"` || c.StorageClass != "STANDARD" || c.Owner == nil || c.Size != int64(len(k)) {
			t.Errorf("content %+v", c)
		}
		if _, err := time.Parse(timeFormat, c.LastModified); err != nil {
			t.Errorf("LastModified %q", c.LastModified)
		}
	}
	if strings.Join(keys, "|") != "a+b|c%d|top" || len(res.CommonPrefixes) != 2 || res.CommonPrefixes[0].Prefix != "a+b/" {
		t.Fatalf("keys %q, prefixes %+v (the a b/ prefix must be URL-encoded as a+b/)", keys, res.CommonPrefixes)
	}
	if res.Contents[0].Key != "a%2Bb" {
		t.Fatalf("encoded key %q, want a%%2Bb", res.Contents[0].Key)
	}
	// Without encoding-type keys are raw and no owner unless asked.
	res = list(t, "list-type=2&prefix=a")
	if len(res.Contents) != 3 || res.Contents[0].Key != "a b/1" || res.Contents[0].Owner != nil || res.EncodingType != "" {
		t.Fatalf("raw listing %+v", res)
	}
	// Paging with continuation tokens.
	var all []string
	q := "list-type=2&max-keys=2"
	for pages := 0; ; pages++ {
		res = list(t, q)
		for _, c := range res.Contents {
			all = append(all, c.Key)
		}
		if !res.IsTruncated {
			break
		}
		if res.NextContinuationToken == "" || res.KeyCount != 2 || pages > 5 {
			t.Fatalf("page %+v", res)
		}
		q = "list-type=2&max-keys=2&continuation-token=" + url.QueryEscape(res.NextContinuationToken)
	}
	if strings.Join(all, "|") != "a b/1|a b/2|a+b|c%d|dir/x|top" {
		t.Fatalf("paged keys %q", all)
	}
	res = list(t, "list-type=2&start-after=c%25d")
	if len(res.Contents) != 2 || res.StartAfter != "c%d" {
		t.Fatalf("start-after: %+v", res)
	}
	res = list(t, "list-type=2&max-keys=0")
	if len(res.Contents) != 0 || res.IsTruncated {
		t.Fatalf("max-keys=0: %+v", res)
	}
	for _, bad := range []string{"list-type=2&continuation-token=garbage", "list-type=2&max-keys=-1", "list-type=2&encoding-type=base64"} {
		r := e.call(t, "GET", "/bkt?"+bad, nil, nil)
		if r.status != 400 || errorCode(t, r.body) != "InvalidArgument" {
			t.Errorf("%s: %d %s", bad, r.status, r.body)
		}
	}
}

func TestListObjectsV1(t *testing.T) {
	e := newEnv(t, Config{})
	e.mkBucket(t, "bkt")
	for _, k := range []string{"a", "b/1", "b/2", "c"} {
		e.put(t, "bkt", k, k)
	}
	r := e.call(t, "GET", "/bkt?max-keys=2&delimiter=/", nil, nil)
	if !strings.Contains(r.body, "<NextMarker>b/</NextMarker>") || !strings.Contains(r.body, "<IsTruncated>true</IsTruncated>") {
		t.Fatalf("page 1: %s", r.body)
	}
	r = e.call(t, "GET", "/bkt?max-keys=2&delimiter=/&marker=b/", nil, nil)
	if !strings.Contains(r.body, "<Key>c</Key>") || strings.Contains(r.body, "<Key>a</Key>") || !strings.Contains(r.body, "<IsTruncated>false</IsTruncated>") {
		t.Fatalf("page 2: %s", r.body)
	}
}

func TestDeleteObjects(t *testing.T) {
	e := newEnv(t, Config{})
	e.mkBucket(t, "bkt")
	for _, k := range []string{"a", "b", "c"} {
		e.put(t, "bkt", k, k)
	}
	doc := `<Delete><Object><Key>a</Key></Object><Object><Key>missing</Key></Object><Object><Key>` + strings.Repeat("x", 1100) + `</Key></Object></Delete>`
	r := e.call(t, "POST", "/bkt?delete", strings.NewReader(doc), map[string]string{"Content-MD5": md5b64(doc)})
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var res struct {
		Deleted []struct{ Key string }
		Error   []struct{ Key, Code string }
	}
	if err := xml.Unmarshal([]byte(r.body), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Deleted) != 2 || res.Deleted[0].Key != "a" || res.Deleted[1].Key != "missing" || len(res.Error) != 1 || res.Error[0].Code != "KeyTooLongError" {
		t.Fatalf("result %+v", res)
	}
	quiet := `<Delete><Quiet>true</Quiet><Object><Key>b</Key></Object></Delete>`
	r = e.call(t, "POST", "/bkt?delete", strings.NewReader(quiet), nil)
	if r.status != 200 || strings.Contains(r.body, "<Deleted>") {
		t.Fatalf("quiet: %d %s", r.status, r.body)
	}
	if _, err := e.store.Stat(context.Background(), "bkt", "b"); err == nil {
		t.Fatal("quiet delete did not delete")
	}
	for _, bad := range []string{"<Delete>", "<Delete></Delete>"} {
		r = e.call(t, "POST", "/bkt?delete", strings.NewReader(bad), nil)
		if r.status != 400 || errorCode(t, r.body) != "MalformedXML" {
			t.Fatalf("%q: %d %s", bad, r.status, r.body)
		}
	}
	r = e.call(t, "POST", "/bkt?delete", strings.NewReader(quiet), map[string]string{"Content-MD5": md5b64("other")})
	if r.status != 400 || errorCode(t, r.body) != "BadDigest" {
		t.Fatalf("bad Content-MD5: %d %s", r.status, r.body)
	}
}

func TestCopyObject(t *testing.T) {
	e := newEnv(t, Config{})
	e.mkBucket(t, "src")
	e.mkBucket(t, "dst")
	if _, err := e.store.Put(context.Background(), "src", "a b", strings.NewReader("copy me"), objectstore.PutOptions{
		ContentType: "text/x", UserMetadata: map[string]string{"m": "1"},
	}); err != nil {
		t.Fatal(err)
	}
	r := e.call(t, "PUT", "/dst/copied", nil, map[string]string{"x-amz-copy-source": "/src/a%20b"})
	if r.status != 200 || !strings.Contains(r.body, "<ETag>&#34;"+md5hex("copy me")+"&#34;</ETag>") && !strings.Contains(r.body, `<ETag>"`+md5hex("copy me")+`"</ETag>`) {
		t.Fatalf("copy: %d %s", r.status, r.body)
	}
	r = e.call(t, "GET", "/dst/copied", nil, nil)
	if r.body != "copy me" || r.header.Get("Content-Type") != "text/x" || r.header.Get("X-Amz-Meta-M") != "1" {
		t.Fatalf("copied object: %v %q", r.header, r.body)
	}
	r = e.call(t, "PUT", "/dst/replaced", nil, map[string]string{"x-amz-copy-source": "src/a%20b", "x-amz-metadata-directive": "REPLACE", "Content-Type": "text/y"})
	if r.status != 200 {
		t.Fatalf("copy REPLACE: %d %s", r.status, r.body)
	}
	if r = e.call(t, "HEAD", "/dst/replaced", nil, nil); r.header.Get("Content-Type") != "text/y" || r.header.Get("X-Amz-Meta-M") != "" {
		t.Fatalf("REPLACE kept metadata: %v", r.header)
	}
	tests := []struct {
		name   string
		header map[string]string
		status int
		code   string
	}{
		{"onto itself", map[string]string{"x-amz-copy-source": "/dst/copied"}, 400, "InvalidRequest"},
		{"missing source", map[string]string{"x-amz-copy-source": "/src/none"}, 404, "NoSuchKey"},
		{"no key", map[string]string{"x-amz-copy-source": "/src"}, 400, "InvalidArgument"},
		{"source if-match fails", map[string]string{"x-amz-copy-source": "/src/a%20b", "x-amz-copy-source-if-match": `"x"`}, 412, "PreconditionFailed"},
		{"source if-none-match fails", map[string]string{"x-amz-copy-source": "/src/a%20b", "x-amz-copy-source-if-none-match": `"` + md5hex("copy me") + `"`}, 412, "PreconditionFailed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.call(t, "PUT", "/dst/copied", nil, tt.header)
			if r.status != tt.status || errorCode(t, r.body) != tt.code {
				t.Fatalf("%d %s", r.status, r.body)
			}
		})
	}
}

func TestExpect100Continue(t *testing.T) {
	e := newEnv(t, Config{})
	e.mkBucket(t, "bkt")
	client := e.srv.Client()
	tr := client.Transport.(*http.Transport).Clone()
	tr.ExpectContinueTimeout = 5 * time.Second
	client = &http.Client{Transport: tr}
	req, _ := http.NewRequest("PUT", e.srv.URL+"/bkt/k", strings.NewReader("continued"))
	req.Header.Set("Expect", "100-continue")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	// Rejected before the body is sent: the error comes back without
	// waiting for a body.
	req, _ = http.NewRequest("PUT", e.srv.URL+"/nobucket/k", strings.NewReader("never sent"))
	req.Header.Set("Expect", "100-continue")
	start := time.Now()
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 || time.Since(start) > 4*time.Second {
		t.Fatalf("status %d after %v", resp.StatusCode, time.Since(start))
	}
}
