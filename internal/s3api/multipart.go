package s3api

import (
	"encoding/xml"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sagebox/sagebox/internal/objectstore"
)

// maxCompleteBody bounds a CompleteMultipartUpload document (10000 parts
// with every checksum member fit well within it).
const maxCompleteBody = 8 << 20

func (h *Handler) createMultipart(rq *request) error {
	r := rq.r
	if err := objectstore.ValidateKey(rq.key); err != nil {
		return err
	}
	meta, err := userMetadata(r)
	if err != nil {
		return err
	}
	opts := objectstore.MultipartOptions{
		ContentType:  r.Header.Get("Content-Type"),
		Headers:      objectHeaders(r),
		UserMetadata: meta,
		ChecksumType: strings.ToUpper(r.Header.Get("x-amz-checksum-type")),
	}
	if v := r.Header.Get("x-amz-checksum-algorithm"); v != "" {
		a, ok := objectstore.ParseChecksumAlgorithm(v)
		if !ok {
			return newError(http.StatusBadRequest, "InvalidRequest", "Checksum algorithm %q is not supported.", v)
		}
		opts.ChecksumAlgorithm = a
	}
	up, err := h.store.CreateMultipart(rq.ctx, rq.bucket, rq.key, opts)
	if err != nil {
		return err
	}
	hd := rq.w.Header()
	if up.ChecksumAlgorithm != "" {
		hd.Set("x-amz-checksum-algorithm", string(up.ChecksumAlgorithm))
		hd.Set("x-amz-checksum-type", up.ChecksumType)
	}
	echoEncryption(hd, r.Header.Get)
	return writeXML(rq.w, initiateMultipartUploadResult{Xmlns: xmlns, Bucket: rq.bucket, Key: rq.key, UploadID: up.ID})
}

func (h *Handler) uploadPart(rq *request) error {
	n, err := strconv.Atoi(rq.query.Get("partNumber"))
	if err != nil || n < 1 || n > objectstore.MaxPartNumber {
		return errInvalidPartNumberArg
	}
	p, err := h.openPayload(rq)
	if err != nil {
		return err
	}
	part, err := h.store.UploadPart(rq.ctx, rq.bucket, rq.key, rq.query.Get("uploadId"), n, p.body, p.integrity)
	if err != nil {
		return err
	}
	hd := rq.w.Header()
	hd.Set("ETag", part.ETag)
	part.Checksums.Each(func(a objectstore.ChecksumAlgorithm, v string) { hd.Set(a.Header(), v) })
	echoEncryption(hd, rq.r.Header.Get)
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

// parseComplete parses a CompleteMultipartUpload document.
func parseComplete(r io.Reader) ([]objectstore.CompletePart, error) {
	var doc completeMultipartUpload
	if err := xml.NewDecoder(r).Decode(&doc); err != nil {
		return nil, errMalformedXML
	}
	if len(doc.Parts) == 0 || len(doc.Parts) > objectstore.MaxPartNumber {
		return nil, errMalformedXML
	}
	parts := make([]objectstore.CompletePart, len(doc.Parts))
	for i, p := range doc.Parts {
		if p.PartNumber < 1 || p.PartNumber > objectstore.MaxPartNumber || p.ETag == "" {
			return nil, errMalformedXML
		}
		parts[i] = objectstore.CompletePart{Number: p.PartNumber, ETag: p.ETag, Checksums: p.toChecksums()}
	}
	return parts, nil
}

type completeOutcome struct {
	info objectstore.ObjectInfo
	err  error
}

func (h *Handler) completeMultipart(rq *request) error {
	body, err := h.readSmallBody(rq, maxCompleteBody)
	if err != nil {
		return err
	}
	parts, err := parseComplete(strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	uploadID := rq.query.Get("uploadId")
	done := make(chan completeOutcome, 1)
	go func() {
		if h.beforeComplete != nil {
			h.beforeComplete()
		}
		info, err := h.store.CompleteMultipart(rq.ctx, rq.bucket, rq.key, uploadID, parts)
		done <- completeOutcome{info, err}
	}()

	// Assembling a large object takes a while. Like S3, answer quickly
	// when we can; otherwise commit to 200 and send whitespace until the
	// result (or an <Error> document) follows.
	var out completeOutcome
	timer := time.NewTimer(h.keepAliveAfter)
	defer timer.Stop()
	select {
	case out = <-done:
		if out.err != nil {
			return out.err
		}
		return writeXML(rq.w, h.completeResult(rq, out.info))
	case <-timer.C:
	}
	rq.w.Header().Set("Content-Type", "application/xml")
	rq.w.WriteHeader(http.StatusOK)
	io.WriteString(rq.w, xml.Header)
	rq.w.Flush()
	tick := time.NewTicker(h.keepAliveAfter)
	defer tick.Stop()
	for {
		select {
		case out = <-done:
			if out.err != nil {
				ae := toAPIError(out.err)
				if ae.Status >= 500 {
					h.log.Error("s3 complete multipart failed", "bucket", rq.bucket, "key", rq.key, "request_id", rq.id, "err", out.err)
				}
				return xml.NewEncoder(rq.w).Encode(errorXML{
					Code: ae.Code, Message: ae.Message, Resource: rq.r.URL.Path, RequestID: rq.id, HostID: rq.w.Header().Get("x-amz-id-2"),
				})
			}
			return xml.NewEncoder(rq.w).Encode(h.completeResult(rq, out.info))
		case <-tick.C:
			io.WriteString(rq.w, " ")
			rq.w.Flush()
		}
	}
}

func (h *Handler) completeResult(rq *request, info objectstore.ObjectInfo) completeMultipartUploadResult {
	scheme := "http"
	if rq.r.TLS != nil {
		scheme = "https"
	}
	loc := url.URL{Scheme: scheme, Host: rq.r.Host, Path: "/" + rq.bucket + "/" + rq.key}
	return completeMultipartUploadResult{
		Xmlns:        xmlns,
		Location:     loc.String(),
		Bucket:       rq.bucket,
		Key:          rq.key,
		ETag:         info.ETag,
		checksumXML:  toChecksumXML(info.Checksums),
		ChecksumType: info.ChecksumType,
	}
}

func (h *Handler) abortMultipart(rq *request) error {
	if err := h.store.AbortMultipart(rq.ctx, rq.bucket, rq.key, rq.query.Get("uploadId")); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *Handler) listParts(rq *request) error {
	q := rq.query
	max, err := parseMax(q, "max-parts", maxListKeys)
	if err != nil {
		return err
	}
	marker := 0
	if s := q.Get("part-number-marker"); s != "" {
		if marker, err = strconv.Atoi(s); err != nil || marker < 0 {
			return newError(http.StatusBadRequest, "InvalidArgument", "part-number-marker must be a non-negative integer")
		}
	}
	res, err := h.store.ListParts(rq.ctx, rq.bucket, rq.key, q.Get("uploadId"), marker, max)
	if err != nil {
		return err
	}
	out := listPartsResult{
		Xmlns:                xmlns,
		Bucket:               rq.bucket,
		Key:                  rq.key,
		UploadID:             res.Upload.ID,
		Initiator:            h.owner(),
		Owner:                h.owner(),
		StorageClass:         "STANDARD",
		PartNumberMarker:     marker,
		NextPartNumberMarker: res.NextMarker,
		MaxParts:             max,
		IsTruncated:          res.IsTruncated,
		ChecksumAlgorithm:    string(res.Upload.ChecksumAlgorithm),
		ChecksumType:         res.Upload.ChecksumType,
	}
	for _, p := range res.Parts {
		out.Parts = append(out.Parts, partXML{
			PartNumber:   p.Number,
			LastModified: xmlTime(p.LastModified),
			ETag:         p.ETag,
			Size:         p.Size,
			checksumXML:  toChecksumXML(p.Checksums),
		})
	}
	return writeXML(rq.w, out)
}
