package s3api

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/sagebox/sagebox/internal/objectstore"
)

// maxListKeys is the most keys one listing page returns.
const maxListKeys = 1000

// encodeToken makes an opaque continuation token from a listing marker.
func encodeToken(marker string) string {
	return base64.RawURLEncoding.EncodeToString([]byte("v1:" + marker))
}

func decodeToken(tok string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || !strings.HasPrefix(string(b), "v1:") {
		return "", newError(http.StatusBadRequest, "InvalidArgument", "The continuation token provided is incorrect")
	}
	return string(b[3:]), nil
}

// parseMax reads a max-keys style parameter: default def, capped at max.
func parseMax(q url.Values, name string, def int) (int, error) {
	s := q.Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, newError(http.StatusBadRequest, "InvalidArgument", "Provided %s not an integer or within integer range", name)
	}
	return min(n, def), nil
}

// keyEncoder returns the function that writes keys into a listing:
// identity, or URL encoding when encoding-type=url was asked for.
func keyEncoder(q url.Values) (func(string) string, string, error) {
	switch et := q.Get("encoding-type"); {
	case et == "":
		return func(s string) string { return s }, "", nil
	case strings.EqualFold(et, "url"):
		return urlEncodeKey, "url", nil
	default:
		return nil, "", newError(http.StatusBadRequest, "InvalidArgument", "Invalid Encoding Method specified in Request")
	}
}

// urlEncodeKey encodes the way S3 does for encoding-type=url: form
// encoding (clients decode with unquote_plus / QueryUnescape), with "/"
// left readable.
func urlEncodeKey(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "%2F", "/")
}

func (h *Handler) owner() owner { return owner{ID: h.cfg.OwnerID, DisplayName: h.cfg.OwnerName} }

func (h *Handler) listBuckets(rq *request) error {
	q := rq.query
	all, err := h.store.ListBuckets(rq.ctx)
	if err != nil {
		return err
	}
	max := len(all)
	if q.Has("max-buckets") {
		n, err := strconv.Atoi(q.Get("max-buckets"))
		if err != nil || n < 1 || n > 10000 {
			return newError(http.StatusBadRequest, "InvalidArgument", "max-buckets must be an integer between 1 and 10000")
		}
		max = n
	}
	after := ""
	if tok := q.Get("continuation-token"); tok != "" {
		if after, err = decodeToken(tok); err != nil {
			return err
		}
	}
	prefix := q.Get("prefix")
	res := listAllMyBucketsResult{Xmlns: xmlns, Owner: h.owner(), Prefix: prefix}
	region := h.region(rq.r)
	for _, b := range all {
		if b.Name <= after || !strings.HasPrefix(b.Name, prefix) {
			continue
		}
		if len(res.Buckets) == max {
			res.ContinuationToken = encodeToken(res.Buckets[len(res.Buckets)-1].Name)
			break
		}
		res.Buckets = append(res.Buckets, bucketXML{Name: b.Name, CreationDate: xmlTime(b.CreationDate), BucketRegion: region})
	}
	return writeXML(rq.w, res)
}

func (h *Handler) contents(objs []objectstore.ObjectInfo, enc func(string) string, withOwner bool) []contentXML {
	out := make([]contentXML, len(objs))
	for i, o := range objs {
		out[i] = contentXML{
			Key:          enc(o.Key),
			LastModified: xmlTime(o.LastModified),
			ETag:         o.ETag,
			Size:         o.Size,
			StorageClass: "STANDARD",
		}
		if withOwner {
			own := h.owner()
			out[i].Owner = &own
		}
	}
	return out
}

func prefixes(cps []string, enc func(string) string) []commonPrefixXML {
	out := make([]commonPrefixXML, len(cps))
	for i, p := range cps {
		out[i] = commonPrefixXML{Prefix: enc(p)}
	}
	return out
}

func (h *Handler) listObjectsV2(rq *request) error {
	q := rq.query
	enc, encType, err := keyEncoder(q)
	if err != nil {
		return err
	}
	max, err := parseMax(q, "max-keys", maxListKeys)
	if err != nil {
		return err
	}
	opts := objectstore.ListOptions{Prefix: q.Get("prefix"), Delimiter: q.Get("delimiter"), StartAfter: q.Get("start-after"), MaxKeys: max}
	token := q.Get("continuation-token")
	if token != "" {
		if opts.StartAfter, err = decodeToken(token); err != nil {
			return err
		}
		if sa := q.Get("start-after"); sa > opts.StartAfter {
			opts.StartAfter = sa
		}
	}
	if max == 0 {
		opts.MaxKeys = -1
	}
	res, err := h.store.List(rq.ctx, rq.bucket, opts)
	if err != nil {
		return err
	}
	out := listBucketResultV2{
		Xmlns:             xmlns,
		Name:              rq.bucket,
		Prefix:            enc(opts.Prefix),
		Delimiter:         enc(opts.Delimiter),
		MaxKeys:           max,
		EncodingType:      encType,
		KeyCount:          len(res.Objects) + len(res.CommonPrefixes),
		IsTruncated:       res.IsTruncated,
		ContinuationToken: token,
		StartAfter:        enc(q.Get("start-after")),
		Contents:          h.contents(res.Objects, enc, q.Get("fetch-owner") == "true"),
		CommonPrefixes:    prefixes(res.CommonPrefixes, enc),
	}
	if res.IsTruncated {
		out.NextContinuationToken = encodeToken(res.NextMarker)
	}
	return writeXML(rq.w, out)
}

func (h *Handler) listObjectsV1(rq *request) error {
	q := rq.query
	enc, encType, err := keyEncoder(q)
	if err != nil {
		return err
	}
	max, err := parseMax(q, "max-keys", maxListKeys)
	if err != nil {
		return err
	}
	opts := objectstore.ListOptions{Prefix: q.Get("prefix"), Delimiter: q.Get("delimiter"), StartAfter: q.Get("marker"), MaxKeys: max}
	if max == 0 {
		opts.MaxKeys = -1
	}
	res, err := h.store.List(rq.ctx, rq.bucket, opts)
	if err != nil {
		return err
	}
	out := listBucketResultV1{
		Xmlns:          xmlns,
		Name:           rq.bucket,
		Prefix:         enc(opts.Prefix),
		Marker:         enc(opts.StartAfter),
		Delimiter:      enc(opts.Delimiter),
		MaxKeys:        max,
		EncodingType:   encType,
		IsTruncated:    res.IsTruncated,
		Contents:       h.contents(res.Objects, enc, true),
		CommonPrefixes: prefixes(res.CommonPrefixes, enc),
	}
	if res.IsTruncated {
		out.NextMarker = enc(res.NextMarker)
	}
	return writeXML(rq.w, out)
}

func (h *Handler) listMultipartUploads(rq *request) error {
	q := rq.query
	max, err := parseMax(q, "max-uploads", maxListKeys)
	if err != nil {
		return err
	}
	enc, _, err := keyEncoder(q)
	if err != nil {
		return err
	}
	ups, truncated, err := h.store.ListUploads(rq.ctx, rq.bucket, q.Get("prefix"), max)
	if err != nil {
		return err
	}
	out := listMultipartUploadsResult{
		Xmlns:          xmlns,
		Bucket:         rq.bucket,
		KeyMarker:      q.Get("key-marker"),
		UploadIDMarker: q.Get("upload-id-marker"),
		Prefix:         enc(q.Get("prefix")),
		MaxUploads:     max,
		IsTruncated:    truncated,
	}
	for _, u := range ups {
		out.Uploads = append(out.Uploads, uploadXML{
			Key:               enc(u.Key),
			UploadID:          u.ID,
			Initiator:         h.owner(),
			Owner:             h.owner(),
			StorageClass:      "STANDARD",
			Initiated:         xmlTime(u.Initiated),
			ChecksumAlgorithm: string(u.ChecksumAlgorithm),
			ChecksumType:      u.ChecksumType,
		})
	}
	if truncated && len(ups) > 0 {
		out.NextKeyMarker = enc(ups[len(ups)-1].Key)
		out.NextUploadIDMarker = ups[len(ups)-1].ID
	}
	return writeXML(rq.w, out)
}
