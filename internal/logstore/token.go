package logstore

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// encodeToken makes an opaque pagination token of v: base64url JSON, then
// "." and up to three "A"s so that the token's standard-base64 letters and
// digits number 1 more than a multiple of 4. botocore's paginator first tries
// to read a StartingToken as its own base64 JSON; the SageMaker Python SDK
// resumes FilterLogEvents from the service's raw nextToken (live logging in
// wait_for_endpoint), and a plain base64url JSON token there decoded, when its
// length was a multiple of 4, into request parameters ("Unknown parameter in
// input: t, i"). No such count is valid base64, so botocore falls back to
// passing the token through, as it does with AWS's tokens.
func encodeToken(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode token: %w", err)
	}
	return unBase64(base64.RawURLEncoding.EncodeToString(b)), nil
}

// unBase64 appends "." and the filler that makes s undecodable as standard
// base64 (which skips '-', '_' and '.').
func unBase64(s string) string {
	n := 0
	for _, r := range s {
		if r != '-' && r != '_' {
			n++
		}
	}
	return s + "." + strings.Repeat("A", (5-n%4)%4)
}

// decodeToken reads a token made by encodeToken into v.
func decodeToken(token string, v any) error {
	token, _, _ = strings.Cut(token, ".")
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return fmt.Errorf("decode token: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode token: %w", err)
	}
	return nil
}

// gap is a position between two events of a stream: the one just before
// event key (Time, ID). Events with a smaller key lie behind it, the rest
// ahead of it.
type gap struct {
	Time int64
	ID   int64
}

// after returns the gap just after event key (t, id).
func after(t, id int64) gap { return gap{t, id + 1} }

// token spells the gap as a GetLogEvents token: "f/<time>/<id>" to read
// forwards from it, "b/<time>/<id>" to read backwards.
func (g gap) token(forward bool) string {
	dir := "b/"
	if forward {
		dir = "f/"
	}
	return dir + strconv.FormatInt(g.Time, 10) + "/" + strconv.FormatInt(g.ID, 10)
}

// parseGapToken reads a token made by gap.token.
func parseGapToken(token string) (g gap, forward bool, err error) {
	dir, rest, ok := strings.Cut(token, "/")
	if !ok || (dir != "f" && dir != "b") {
		return g, false, ErrInvalidToken
	}
	t, id, ok := strings.Cut(rest, "/")
	if !ok {
		return g, false, ErrInvalidToken
	}
	if g.Time, err = strconv.ParseInt(t, 10, 64); err != nil {
		return g, false, ErrInvalidToken
	}
	if g.ID, err = strconv.ParseInt(id, 10, 64); err != nil {
		return g, false, ErrInvalidToken
	}
	return g, dir == "f", nil
}
