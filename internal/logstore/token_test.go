package logstore

import (
	"encoding/base64"
	"strings"
	"testing"
)

// botoDecodes reports whether botocore's paginator would read token as its
// own StartingToken: Python's base64.b64decode drops every character outside
// the standard alphabet, then needs whole quanta.
func botoDecodes(token string) bool {
	kept := strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '+' || r == '/' {
			return r
		}
		return -1
	}, token)
	_, err := base64.RawStdEncoding.DecodeString(kept)
	return err == nil
}

// The SageMaker Python SDK resumes FilterLogEvents' paginator from the raw
// nextToken; a token botocore can decode becomes request parameters.
func TestTokenNotBotocoreDecodable(t *testing.T) {
	for ts := int64(1772366400000); ts < 1772366400000+64; ts++ {
		for id := int64(1); id < 64; id++ {
			tok, err := encodeToken(&filterCursor{ts, id})
			if err != nil {
				t.Fatal(err)
			}
			if botoDecodes(tok) {
				t.Fatalf("token %q for (%d, %d) is valid base64: botocore would read it as its own", tok, ts, id)
			}
			var got filterCursor
			if err := decodeToken(tok, &got); err != nil || got != (filterCursor{ts, id}) {
				t.Fatalf("decode %q = %v, %v", tok, got, err)
			}
		}
	}
}
