package s3api

import (
	"net/http"
	"net/url"

	"github.com/sagebox/sagebox/internal/objectstore"
)

// unsupportedSubresource returns the first S3 sub-resource in q that
// sagebox does not implement, so such requests get 501 NotImplemented
// rather than being mistaken for plain object or bucket operations.
func unsupportedSubresource(q url.Values) string {
	for name := range q {
		switch name {
		case "accelerate", "acl", "analytics", "attributes", "cors", "encryption", "intelligent-tiering",
			"inventory", "legal-hold", "lifecycle", "logging", "metrics", "notification", "object-lock",
			"ownershipControls", "policy", "policyStatus", "publicAccessBlock", "replication",
			"requestPayment", "restore", "retention", "select", "tagging", "torrent", "versions", "website":
			return name
		}
	}
	return ""
}

func notImplemented(what string) *apiError {
	return newError(http.StatusNotImplemented, "NotImplemented", "A header or query you provided requested a function that is not implemented: %s", what)
}

// dispatch picks the operation from method, bucket, key and sub-resource.
func (h *Handler) dispatch(rq *request) error {
	if sub := unsupportedSubresource(rq.query); sub != "" {
		return notImplemented("?" + sub)
	}
	m := rq.r.Method
	if rq.bucket == "" {
		if m == http.MethodGet {
			return h.listBuckets(rq)
		}
		return errMethodNotAllowed
	}
	if rq.key == "" {
		return h.bucketOp(rq, m)
	}
	return h.objectOp(rq, m)
}

func (h *Handler) bucketOp(rq *request, m string) error {
	if objectstore.ValidateBucketName(rq.bucket) != nil {
		return errInvalidBucketName
	}
	if err := h.checkExpectedOwner(rq); err != nil {
		return err
	}
	q := rq.query
	switch m {
	case http.MethodGet:
		switch {
		case q.Has("location"):
			return h.getBucketLocation(rq)
		case q.Has("versioning"):
			return h.getBucketVersioning(rq)
		case q.Has("uploads"):
			return h.listMultipartUploads(rq)
		case q.Get("list-type") == "2":
			return h.listObjectsV2(rq)
		default:
			return h.listObjectsV1(rq)
		}
	case http.MethodHead:
		return h.headBucket(rq)
	case http.MethodPut:
		return h.createBucket(rq)
	case http.MethodDelete:
		return h.deleteBucket(rq)
	case http.MethodPost:
		if q.Has("delete") {
			return h.deleteObjects(rq)
		}
	}
	return errMethodNotAllowed
}

func (h *Handler) objectOp(rq *request, m string) error {
	if objectstore.ValidateBucketName(rq.bucket) != nil {
		return errInvalidBucketName
	}
	if err := h.checkExpectedOwner(rq); err != nil {
		return err
	}
	q := rq.query
	switch m {
	case http.MethodGet:
		if q.Has("uploadId") {
			return h.listParts(rq)
		}
		return h.getObject(rq, false)
	case http.MethodHead:
		return h.getObject(rq, true)
	case http.MethodPut:
		switch {
		case q.Has("partNumber") && q.Has("uploadId"):
			if rq.r.Header.Get("x-amz-copy-source") != "" {
				return notImplemented("UploadPartCopy")
			}
			return h.uploadPart(rq)
		case rq.r.Header.Get("x-amz-copy-source") != "":
			return h.copyObject(rq)
		default:
			return h.putObject(rq)
		}
	case http.MethodDelete:
		if q.Has("uploadId") {
			return h.abortMultipart(rq)
		}
		return h.deleteObject(rq)
	case http.MethodPost:
		switch {
		case q.Has("uploads"):
			return h.createMultipart(rq)
		case q.Has("uploadId"):
			return h.completeMultipart(rq)
		}
	}
	return errMethodNotAllowed
}
