package s3api

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"testing"
)

// FuzzChunkedReader feeds arbitrary bodies to the aws-chunked decoder. It
// must never panic or yield more bytes than it was given, and whatever it
// accepts must re-encode to a body that decodes to the same data and
// trailers.
func FuzzChunkedReader(f *testing.F) {
	for _, s := range []string{
		"3\r\nabc\r\n0\r\n\r\n",
		"5;chunk-signature=" + strings.Repeat("0", 64) + "\r\nhello\r\n0;chunk-signature=" + strings.Repeat("1", 64) + "\r\n\r\n",
		"1\r\nx\r\n0\r\nx-amz-checksum-crc32:AAAAAA==\r\nx-amz-trailer-signature:abc\r\n\r\n",
		"A\r\n0123456789\r\n0\r\n",
		"0\r\n\r\n",
		"2\r\nabc\r\n",
		"ffffffffffffff\r\n",
	} {
		f.Add([]byte(s), int64(-1))
	}
	f.Add([]byte("3\r\nabc\r\n0\r\n\r\n"), int64(3))
	f.Add([]byte("3\r\nabc\r\n0\r\n\r\n"), int64(2))
	f.Fuzz(func(t *testing.T, body []byte, want int64) {
		cr := newChunkedReader(bytes.NewReader(body), nil, want)
		data, err := io.ReadAll(io.LimitReader(cr, int64(len(body))+1))
		if len(data) > len(body) {
			t.Fatalf("decoded %d bytes from %d", len(data), len(body))
		}
		if err != nil {
			return
		}
		if want >= 0 && int64(len(data)) != want {
			t.Fatalf("accepted %d bytes with x-amz-decoded-content-length %d", len(data), want)
		}
		var again bytes.Buffer
		if len(data) > 0 {
			fmt.Fprintf(&again, "%x\r\n%s\r\n", len(data), data)
		}
		again.WriteString("0\r\n")
		for _, tr := range cr.Trailers() {
			fmt.Fprintf(&again, "%s:%s\r\n", tr.name, tr.value)
		}
		again.WriteString("\r\n")
		cr2 := newChunkedReader(&again, nil, -1)
		data2, err := io.ReadAll(cr2)
		if err != nil || !bytes.Equal(data, data2) || len(cr2.Trailers()) != len(cr.Trailers()) {
			t.Fatalf("re-encoding does not round-trip: %v", err)
		}
	})
}

// FuzzParseRange checks that an accepted range always lies inside the
// object and that a refused one is refused for a reason.
func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"bytes=0-0", "bytes=5-", "bytes=-5", "bytes=-0", "bytes=3-1", "bytes=0-1,2-3",
		"bytes=99999999999999999999-", "bytes= 1 - 2 ", "bytes=-", "items=0-1", "bytes=0--1"} {
		f.Add(s, int64(10))
		f.Add(s, int64(0))
	}
	f.Fuzz(func(t *testing.T, h string, size int64) {
		if size < 0 {
			size = -size
		}
		if size < 0 { // MinInt64
			return
		}
		start, length, st := parseRange(h, size)
		switch st {
		case rangeOK:
			if start < 0 || length <= 0 || start >= size || start+length > size {
				t.Fatalf("parseRange(%q, %d) = %d+%d outside the object", h, size, start, length)
			}
		case rangeNone, rangeUnsatisfiable:
			if start != 0 || length != 0 {
				t.Fatalf("parseRange(%q, %d) returned a range with status %d", h, size, st)
			}
		default:
			t.Fatalf("unknown status %d", st)
		}
	})
}

// FuzzParseComplete feeds arbitrary documents to the
// CompleteMultipartUpload parser: no panics, and accepted documents are
// well-formed part lists that survive re-encoding.
func FuzzParseComplete(f *testing.F) {
	f.Add(`<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Part><ETag>"a"</ETag><PartNumber>1</PartNumber></Part></CompleteMultipartUpload>`)
	f.Add(`<CompleteMultipartUpload><Part><PartNumber>2</PartNumber><ETag>x</ETag><ChecksumCRC32>AAAAAA==</ChecksumCRC32></Part><Part><PartNumber>1</PartNumber><ETag>y</ETag></Part></CompleteMultipartUpload>`)
	f.Add(`<CompleteMultipartUpload></CompleteMultipartUpload>`)
	f.Add(`<CompleteMultipartUpload><Part><PartNumber>0</PartNumber><ETag>x</ETag></Part></CompleteMultipartUpload>`)
	f.Add(`<!DOCTYPE x [<!ENTITY a "aaaa">]><CompleteMultipartUpload/>`)
	f.Fuzz(func(t *testing.T, doc string) {
		parts, err := parseComplete(strings.NewReader(doc))
		if err != nil {
			if err != errMalformedXML {
				t.Fatalf("error %v is not MalformedXML", err)
			}
			return
		}
		if len(parts) == 0 {
			t.Fatal("accepted a document without parts")
		}
		var out completeMultipartUpload
		for _, p := range parts {
			if p.Number < 1 || p.Number > 10000 || p.ETag == "" {
				t.Fatalf("accepted part %+v", p)
			}
			out.Parts = append(out.Parts, completePartXML{PartNumber: p.Number, ETag: p.ETag, checksumXML: toChecksumXML(p.Checksums)})
		}
		b, err := xml.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		again, err := parseComplete(bytes.NewReader(b))
		if err != nil || len(again) != len(parts) {
			t.Fatalf("re-encoded document rejected: %v\n%s", err, b)
		}
		for i := range parts {
			if again[i] != parts[i] {
				t.Fatalf("part %d changed: %+v vs %+v", i, again[i], parts[i])
			}
		}
	})
}
