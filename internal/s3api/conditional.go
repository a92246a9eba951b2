package s3api

import (
	"net/http"
	"strings"
	"time"

	"github.com/sagebox/sagebox/internal/objectstore"
)

// checkConditions evaluates If-Match, If-Unmodified-Since, If-None-Match
// and If-Modified-Since the way S3 does for GET and HEAD. It returns 0 to
// proceed, 304 or 412.
func checkConditions(r *http.Request, etag string, modified time.Time) int {
	modified = modified.Truncate(time.Second)
	if v := r.Header.Get("If-Match"); v != "" {
		if !etagListMatches(v, etag) {
			return http.StatusPreconditionFailed
		}
	} else if t, ok := headerTime(r, "If-Unmodified-Since"); ok && modified.After(t) {
		return http.StatusPreconditionFailed
	}
	if v := r.Header.Get("If-None-Match"); v != "" {
		if etagListMatches(v, etag) {
			return http.StatusNotModified
		}
	} else if t, ok := headerTime(r, "If-Modified-Since"); ok && !modified.After(t) {
		return http.StatusNotModified
	}
	return 0
}

func headerTime(r *http.Request, name string) (time.Time, bool) {
	v := r.Header.Get(name)
	if v == "" {
		return time.Time{}, false
	}
	t, err := http.ParseTime(v)
	return t, err == nil
}

// etagListMatches matches "*" or a comma-separated list of entity tags.
func etagListMatches(list, etag string) bool {
	for _, e := range strings.Split(list, ",") {
		e = strings.TrimSpace(e)
		if e == "*" || objectstore.ETagsEqual(e, etag) {
			return true
		}
	}
	return false
}
