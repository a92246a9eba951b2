package s3api

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/sagebox/sagebox/internal/objectstore"
)

// maxUserMetadata is S3's limit on the total size of x-amz-meta-* names
// and values.
const maxUserMetadata = 2 << 10

// storedHeaderNames are the request headers recorded with an object and
// returned on GET and HEAD.
func storedHeaderNames() []string {
	return []string{
		"Cache-Control", "Content-Disposition", "Content-Language", "Expires",
		"X-Amz-Server-Side-Encryption", "X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id",
		"X-Amz-Server-Side-Encryption-Context", "X-Amz-Server-Side-Encryption-Bucket-Key-Enabled",
		"X-Amz-Storage-Class", "X-Amz-Website-Redirect-Location",
	}
}

// objectHeaders collects the headers to store, including Content-Encoding
// without its aws-chunked token.
func objectHeaders(r *http.Request) map[string]string {
	m := map[string]string{}
	for _, name := range storedHeaderNames() {
		if v := r.Header.Get(name); v != "" {
			m[name] = v
		}
	}
	if ce := storedContentEncoding(r); ce != "" {
		m["Content-Encoding"] = ce
	}
	return m
}

// userMetadata collects x-amz-meta-* (names lower-cased, prefix removed).
func userMetadata(r *http.Request) (map[string]string, error) {
	m := map[string]string{}
	size := 0
	for name, values := range r.Header {
		lower := strings.ToLower(name)
		k, ok := strings.CutPrefix(lower, "x-amz-meta-")
		if !ok {
			continue
		}
		v := strings.Join(values, ",")
		m[k] = v
		size += len(k) + len(v)
	}
	if size > maxUserMetadata {
		return nil, errMetadataTooLarge
	}
	return m, nil
}

// setChecksumHeaders writes x-amz-checksum-* for every stored checksum.
func setChecksumHeaders(h http.Header, sums objectstore.Checksums, typ string) {
	if sums.IsZero() {
		return
	}
	sums.Each(func(a objectstore.ChecksumAlgorithm, v string) { h.Set(a.Header(), v) })
	if typ == "" {
		typ = objectstore.ChecksumTypeFullObject
	}
	h.Set("x-amz-checksum-type", typ)
}

// echoEncryption repeats the server-side-encryption headers of a request
// or an object (accepted and recorded, not acted on).
func echoEncryption(dst http.Header, get func(string) string) {
	for _, name := range []string{"X-Amz-Server-Side-Encryption", "X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id", "X-Amz-Server-Side-Encryption-Bucket-Key-Enabled"} {
		if v := get(name); v != "" {
			dst.Set(name, v)
		}
	}
}

func (h *Handler) putObject(rq *request) error {
	if err := objectstore.ValidateKey(rq.key); err != nil {
		return err
	}
	meta, err := userMetadata(rq.r)
	if err != nil {
		return err
	}
	p, err := h.openPayload(rq)
	if err != nil {
		return err
	}
	info, err := h.store.Put(rq.ctx, rq.bucket, rq.key, p.body, objectstore.PutOptions{
		ContentType:  rq.r.Header.Get("Content-Type"),
		Headers:      objectHeaders(rq.r),
		UserMetadata: meta,
		Integrity:    p.integrity,
		Preconditions: objectstore.Preconditions{
			IfMatch:     rq.r.Header.Get("If-Match"),
			IfNoneMatch: rq.r.Header.Get("If-None-Match"),
		},
	})
	if err != nil {
		return err
	}
	hd := rq.w.Header()
	hd.Set("ETag", info.ETag)
	setChecksumHeaders(hd, info.Checksums, info.ChecksumType)
	echoEncryption(hd, rq.r.Header.Get)
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

// responseOverrides are the GetObject query parameters that replace
// response headers (used by presigned URLs).
func responseOverrides() map[string]string {
	return map[string]string{
		"response-content-type":        "Content-Type",
		"response-content-language":    "Content-Language",
		"response-expires":             "Expires",
		"response-cache-control":       "Cache-Control",
		"response-content-disposition": "Content-Disposition",
		"response-content-encoding":    "Content-Encoding",
	}
}

// setObjectHeaders writes the metadata headers of GET and HEAD.
func (h *Handler) setObjectHeaders(rq *request, info objectstore.ObjectInfo) {
	hd := rq.w.Header()
	hd.Set("ETag", info.ETag)
	hd.Set("Last-Modified", info.LastModified.UTC().Format(http.TimeFormat))
	hd.Set("Content-Type", info.ContentType)
	hd.Set("Accept-Ranges", "bytes")
	for k, v := range info.Headers {
		hd.Set(k, v)
	}
	for k, v := range info.UserMetadata {
		// Lower-case on the wire, as S3 sends it: botocore keeps the
		// case of what follows the prefix.
		hd["x-amz-meta-"+k] = []string{v}
	}
	for param, header := range responseOverrides() {
		if v := rq.query.Get(param); v != "" {
			hd.Set(header, v)
		}
	}
}

func (h *Handler) getObject(rq *request, head bool) error {
	r := rq.r
	rangeHdr := r.Header.Get("Range")
	part := 0
	if s := rq.query.Get("partNumber"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > objectstore.MaxPartNumber {
			return errInvalidPartNumberArg
		}
		if rangeHdr != "" {
			return newError(http.StatusBadRequest, "InvalidRequest", "Cannot specify both Range header and partNumber query parameter")
		}
		part = n
	}

	var (
		info objectstore.ObjectInfo
		obj  *objectstore.Object
		err  error
	)
	if head {
		info, err = h.store.Stat(rq.ctx, rq.bucket, rq.key)
	} else {
		obj, err = h.store.Get(rq.ctx, rq.bucket, rq.key)
		if err == nil {
			defer obj.Close()
			info = obj.Info
		}
	}
	if err != nil {
		return err
	}

	switch checkConditions(r, info.ETag, info.LastModified) {
	case http.StatusNotModified:
		hd := rq.w.Header()
		hd.Set("ETag", info.ETag)
		hd.Set("Last-Modified", info.LastModified.UTC().Format(http.TimeFormat))
		rq.w.WriteHeader(http.StatusNotModified)
		return nil
	case http.StatusPreconditionFailed:
		return errPreconditionFailed
	}

	hd := rq.w.Header()
	offset, length, status := int64(0), info.Size, http.StatusOK
	switch {
	case part > 0:
		o, n, ok := info.PartRange(part)
		if !ok {
			return errInvalidPartNumber
		}
		if info.PartsCount() > 0 {
			hd.Set("x-amz-mp-parts-count", strconv.Itoa(info.PartsCount()))
		}
		if n > 0 {
			offset, length, status = o, n, http.StatusPartialContent
		}
	case rangeHdr != "":
		start, n, st := parseRange(rangeHdr, info.Size)
		switch st {
		case rangeOK:
			offset, length, status = start, n, http.StatusPartialContent
		case rangeUnsatisfiable:
			hd.Set("Content-Range", fmt.Sprintf("bytes */%d", info.Size))
			return errInvalidRange
		}
	}

	h.setObjectHeaders(rq, info)
	if status == http.StatusPartialContent {
		hd.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", offset, offset+length-1, info.Size))
	} else if strings.EqualFold(r.Header.Get("x-amz-checksum-mode"), "ENABLED") {
		// Only a whole-object response may carry the object's checksum:
		// clients verify it against the bytes they receive.
		setChecksumHeaders(hd, info.Checksums, info.ChecksumType)
	}
	hd.Set("Content-Length", strconv.FormatInt(length, 10))
	rq.w.WriteHeader(status)
	if head || length == 0 {
		return nil
	}
	if _, err := obj.CopyRange(rq.w, offset, length); err != nil {
		h.log.Debug("s3 get: response cut short", "bucket", rq.bucket, "key", rq.key, "request_id", rq.id, "err", err)
	}
	return nil
}

func (h *Handler) deleteObject(rq *request) error {
	if err := h.store.Delete(rq.ctx, rq.bucket, rq.key); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *Handler) copyObject(rq *request) error {
	r := rq.r
	if err := objectstore.ValidateKey(rq.key); err != nil {
		return err
	}
	src, _, _ := strings.Cut(r.Header.Get("x-amz-copy-source"), "?")
	src, err := url.PathUnescape(src)
	if err != nil {
		return newError(http.StatusBadRequest, "InvalidArgument", "Copy Source must be URL-encoded")
	}
	srcBucket, srcKey, ok := strings.Cut(strings.TrimPrefix(src, "/"), "/")
	if !ok || srcBucket == "" || srcKey == "" {
		return newError(http.StatusBadRequest, "InvalidArgument", "Copy Source must mention the source bucket and key: sourcebucket/sourcekey")
	}
	directive := strings.ToUpper(r.Header.Get("x-amz-metadata-directive"))
	switch directive {
	case "", "COPY", "REPLACE":
	default:
		return newError(http.StatusBadRequest, "InvalidArgument", "Unknown metadata directive.")
	}
	if srcBucket == rq.bucket && srcKey == rq.key && directive != "REPLACE" {
		return newError(http.StatusBadRequest, "InvalidRequest",
			"This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.")
	}
	if r.Header.Get("x-amz-copy-source-if-none-match") != "" ||
		r.Header.Get("x-amz-copy-source-if-modified-since") != "" ||
		r.Header.Get("x-amz-copy-source-if-unmodified-since") != "" {
		cur, err := h.store.Stat(rq.ctx, srcBucket, srcKey)
		if err != nil {
			return err
		}
		cond := &http.Request{Header: http.Header{}}
		for _, c := range []string{"If-None-Match", "If-Modified-Since", "If-Unmodified-Since"} {
			if v := r.Header.Get("x-amz-copy-source-" + c); v != "" {
				cond.Header.Set(c, v)
			}
		}
		if checkConditions(cond, cur.ETag, cur.LastModified) != 0 {
			return errPreconditionFailed
		}
	}
	opts := objectstore.CopyOptions{
		ReplaceMetadata: directive == "REPLACE",
		SourceIfMatch:   r.Header.Get("x-amz-copy-source-if-match"),
	}
	if opts.ReplaceMetadata {
		meta, err := userMetadata(r)
		if err != nil {
			return err
		}
		opts.ContentType, opts.Headers, opts.UserMetadata = r.Header.Get("Content-Type"), objectHeaders(r), meta
	}
	info, err := h.store.Copy(rq.ctx, srcBucket, srcKey, rq.bucket, rq.key, opts)
	if err != nil {
		return err
	}
	echoEncryption(rq.w.Header(), r.Header.Get)
	return writeXML(rq.w, copyObjectResult{
		Xmlns:        xmlns,
		ETag:         info.ETag,
		LastModified: xmlTime(info.LastModified),
		checksumXML:  toChecksumXML(info.Checksums),
	})
}

func toChecksumXML(c objectstore.Checksums) checksumXML {
	return checksumXML{
		ChecksumCRC32:     c.CRC32,
		ChecksumCRC32C:    c.CRC32C,
		ChecksumCRC64NVME: c.CRC64NVME,
		ChecksumSHA1:      c.SHA1,
		ChecksumSHA256:    c.SHA256,
	}
}

func (c checksumXML) toChecksums() objectstore.Checksums {
	return objectstore.Checksums{
		CRC32:     c.ChecksumCRC32,
		CRC32C:    c.ChecksumCRC32C,
		CRC64NVME: c.ChecksumCRC64NVME,
		SHA1:      c.ChecksumSHA1,
		SHA256:    c.ChecksumSHA256,
	}
}
