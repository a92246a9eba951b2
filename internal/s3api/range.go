package s3api

import (
	"strconv"
	"strings"
)

// rangeStatus is the outcome of parsing a Range header.
type rangeStatus int

const (
	// rangeNone: no usable Range header; serve the whole object. Like S3,
	// a malformed or multi-range header is ignored.
	rangeNone rangeStatus = iota
	// rangeOK: serve [start, start+length).
	rangeOK
	// rangeUnsatisfiable: answer 416 InvalidRange.
	rangeUnsatisfiable
)

// parseRange interprets a single-range "bytes=" header against an object
// of size bytes.
func parseRange(h string, size int64) (start, length int64, st rangeStatus) {
	spec, ok := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	if !ok || strings.Contains(spec, ",") {
		return 0, 0, rangeNone
	}
	first, last, ok := strings.Cut(strings.TrimSpace(spec), "-")
	if !ok {
		return 0, 0, rangeNone
	}
	first, last = strings.TrimSpace(first), strings.TrimSpace(last)
	switch {
	case first == "" && last == "":
		return 0, 0, rangeNone
	case first == "": // suffix: the last n bytes
		n, ok := parseDigits(last)
		if !ok {
			return 0, 0, rangeNone
		}
		if n == 0 || size == 0 {
			return 0, 0, rangeUnsatisfiable
		}
		n = min(n, size)
		return size - n, n, rangeOK
	default:
		a, ok := parseDigits(first)
		if !ok {
			return 0, 0, rangeNone
		}
		end := size - 1
		if last != "" {
			b, ok := parseDigits(last)
			if !ok || b < a {
				return 0, 0, rangeNone
			}
			end = min(b, size-1)
		}
		if a >= size {
			return 0, 0, rangeUnsatisfiable
		}
		return a, end - a + 1, rangeOK
	}
}

// parseDigits parses a non-negative decimal without sign or spaces.
func parseDigits(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
