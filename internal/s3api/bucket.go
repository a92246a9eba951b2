package s3api

import (
	"bytes"
	"encoding/xml"
	"net/http"
)

// maxBucketConfig bounds a CreateBucket body.
const maxBucketConfig = 64 << 10

func (h *Handler) createBucket(rq *request) error {
	body, err := h.readSmallBody(rq, maxBucketConfig)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) > 0 {
		var cfg createBucketConfiguration
		if err := xml.Unmarshal(body, &cfg); err != nil {
			return errMalformedXML
		}
	}
	if err := h.store.CreateBucket(rq.ctx, rq.bucket); err != nil {
		return err
	}
	rq.w.Header().Set("Location", "/"+rq.bucket)
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

func (h *Handler) headBucket(rq *request) error {
	if _, err := h.store.HeadBucket(rq.ctx, rq.bucket); err != nil {
		return err
	}
	rq.w.Header().Set("x-amz-bucket-region", h.region(rq.r))
	rq.w.Header().Set("x-amz-access-point-alias", "false")
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

func (h *Handler) deleteBucket(rq *request) error {
	if err := h.store.DeleteBucket(rq.ctx, rq.bucket); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *Handler) getBucketLocation(rq *request) error {
	if _, err := h.store.HeadBucket(rq.ctx, rq.bucket); err != nil {
		return err
	}
	region := h.region(rq.r)
	if region == "us-east-1" {
		region = "" // S3 reports the classic region as an empty constraint
	}
	return writeXML(rq.w, locationConstraint{Xmlns: xmlns, Region: region})
}

func (h *Handler) getBucketVersioning(rq *request) error {
	if _, err := h.store.HeadBucket(rq.ctx, rq.bucket); err != nil {
		return err
	}
	return writeXML(rq.w, versioningConfiguration{Xmlns: xmlns})
}
