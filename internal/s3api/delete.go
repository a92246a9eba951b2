package s3api

import (
	"encoding/xml"
	"errors"

	"github.com/sagebox/sagebox/internal/objectstore"
)

// Limits of DeleteObjects.
const (
	maxDeleteObjects = 1000
	maxDeleteBody    = 2 << 20
)

// parseDelete parses a DeleteObjects request document.
func parseDelete(body []byte) (deleteRequest, error) {
	var req deleteRequest
	if err := xml.Unmarshal(body, &req); err != nil {
		return deleteRequest{}, errMalformedXML
	}
	if len(req.Objects) == 0 || len(req.Objects) > maxDeleteObjects {
		return deleteRequest{}, errMalformedXML
	}
	return req, nil
}

func (h *Handler) deleteObjects(rq *request) error {
	body, err := h.readSmallBody(rq, maxDeleteBody)
	if err != nil {
		return err
	}
	req, err := parseDelete(body)
	if err != nil {
		return err
	}
	if _, err := h.store.HeadBucket(rq.ctx, rq.bucket); err != nil {
		return err
	}
	res := deleteResult{Xmlns: xmlns}
	for _, o := range req.Objects {
		err := objectstore.ValidateKey(o.Key)
		if err == nil {
			err = h.store.Delete(rq.ctx, rq.bucket, o.Key)
		}
		if err != nil {
			if errors.Is(err, objectstore.ErrNoSuchBucket) {
				return err
			}
			ae := toAPIError(err)
			res.Errors = append(res.Errors, deleteErrorXML{Key: o.Key, Code: ae.Code, Message: ae.Message})
			continue
		}
		if !req.Quiet {
			res.Deleted = append(res.Deleted, deletedXML{Key: o.Key})
		}
	}
	return writeXML(rq.w, res)
}
