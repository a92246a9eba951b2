package objectstore

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"strings"
)

// ChecksumAlgorithm names an S3 additional checksum algorithm as it appears
// in x-amz-checksum-algorithm / x-amz-sdk-checksum-algorithm.
type ChecksumAlgorithm string

// The checksum algorithms S3 defines.
const (
	CRC32     ChecksumAlgorithm = "CRC32"
	CRC32C    ChecksumAlgorithm = "CRC32C"
	CRC64NVME ChecksumAlgorithm = "CRC64NVME"
	SHA1      ChecksumAlgorithm = "SHA1"
	SHA256    ChecksumAlgorithm = "SHA256"
)

// AllChecksumAlgorithms lists every supported algorithm, in a fixed order.
func AllChecksumAlgorithms() []ChecksumAlgorithm {
	return []ChecksumAlgorithm{CRC32, CRC32C, CRC64NVME, SHA1, SHA256}
}

// Checksum types of a multipart object (x-amz-checksum-type).
const (
	ChecksumTypeFullObject = "FULL_OBJECT"
	ChecksumTypeComposite  = "COMPOSITE"
)

// ParseChecksumAlgorithm maps a header value (any case) to an algorithm.
func ParseChecksumAlgorithm(s string) (ChecksumAlgorithm, bool) {
	for _, a := range AllChecksumAlgorithms() {
		if strings.EqualFold(s, string(a)) {
			return a, true
		}
	}
	return "", false
}

// Header is the lower-case HTTP header that carries this checksum,
// e.g. "x-amz-checksum-crc32".
func (a ChecksumAlgorithm) Header() string { return "x-amz-checksum-" + strings.ToLower(string(a)) }

// digestSize is the raw length of the algorithm's digest.
func (a ChecksumAlgorithm) digestSize() int {
	switch a {
	case CRC32, CRC32C:
		return 4
	case CRC64NVME:
		return 8
	case SHA1:
		return sha1.Size
	case SHA256:
		return sha256.Size
	}
	return 0
}

// crc64NVMETable is CRC-64/NVME (poly 0xad93d23594c93659, reflected).
// hash/crc64 applies the init and final XOR of all ones that the NVME
// variant specifies.
var crc64NVMETable = crc64.MakeTable(0x9a6c9329ac4bc9b5)

var crc32cTable = crc32.MakeTable(crc32.Castagnoli)

// NewHash returns a fresh hash for the algorithm. Its Sum is the big-endian
// digest S3 base64-encodes.
func (a ChecksumAlgorithm) NewHash() hash.Hash {
	switch a {
	case CRC32:
		return crc32.NewIEEE()
	case CRC32C:
		return crc32.New(crc32cTable)
	case CRC64NVME:
		return crc64.New(crc64NVMETable)
	case SHA1:
		return sha1.New()
	case SHA256:
		return sha256.New()
	}
	return nil
}

// Checksums holds base64-encoded checksums, as S3 puts them in
// x-amz-checksum-* headers. Empty fields are absent. A multipart object with
// a composite checksum has values of the form "<base64>-<parts>".
type Checksums struct {
	CRC32     string `json:"crc32,omitempty"`
	CRC32C    string `json:"crc32c,omitempty"`
	CRC64NVME string `json:"crc64nvme,omitempty"`
	SHA1      string `json:"sha1,omitempty"`
	SHA256    string `json:"sha256,omitempty"`
}

// Get returns the value for one algorithm.
func (c Checksums) Get(a ChecksumAlgorithm) string {
	switch a {
	case CRC32:
		return c.CRC32
	case CRC32C:
		return c.CRC32C
	case CRC64NVME:
		return c.CRC64NVME
	case SHA1:
		return c.SHA1
	case SHA256:
		return c.SHA256
	}
	return ""
}

// Set stores the value for one algorithm.
func (c *Checksums) Set(a ChecksumAlgorithm, v string) {
	switch a {
	case CRC32:
		c.CRC32 = v
	case CRC32C:
		c.CRC32C = v
	case CRC64NVME:
		c.CRC64NVME = v
	case SHA1:
		c.SHA1 = v
	case SHA256:
		c.SHA256 = v
	}
}

// IsZero reports whether no checksum is set.
func (c Checksums) IsZero() bool { return c == Checksums{} }

// Each calls fn for every algorithm that has a value, in a fixed order.
func (c Checksums) Each(fn func(a ChecksumAlgorithm, v string)) {
	for _, a := range AllChecksumAlgorithms() {
		if v := c.Get(a); v != "" {
			fn(a, v)
		}
	}
}

// ComputeChecksum returns the base64 checksum of everything r yields.
func ComputeChecksum(a ChecksumAlgorithm, r io.Reader) (string, error) {
	h := a.NewHash()
	if h == nil {
		return "", fmt.Errorf("compute checksum: unknown algorithm %q", a)
	}
	if _, err := io.Copy(h, r); err != nil {
		return "", fmt.Errorf("compute %s checksum: %w", a, err)
	}
	return base64.StdEncoding.EncodeToString(h.Sum(nil)), nil
}

// validChecksum reports whether v is a well-formed base64 digest for a.
func validChecksum(a ChecksumAlgorithm, v string) bool {
	b, err := base64.StdEncoding.DecodeString(v)
	return err == nil && len(b) == a.digestSize()
}

// Integrity says what Put and UploadPart verify and record about the bytes
// they receive. Every check runs over the bytes actually stored; on any
// mismatch nothing is stored.
type Integrity struct {
	// ContentMD5 is the raw (not base64) MD5 the client announced
	// (Content-MD5); a mismatch is ErrBadDigest.
	ContentMD5 []byte
	// ContentSHA256 is the raw SHA-256 the client announced
	// (a hex x-amz-content-sha256); a mismatch is ErrSHA256Mismatch.
	ContentSHA256 []byte
	// Algorithms are computed and recorded even without an expected value
	// (x-amz-sdk-checksum-algorithm, or x-amz-trailer before the trailer
	// arrives).
	Algorithms []ChecksumAlgorithm
	// Checksums are expected values known up front (x-amz-checksum-*
	// headers); each is computed, verified and recorded.
	Checksums Checksums
	// Trailer, if set, is called once the body has been read to EOF and
	// returns expected values that only arrive after the data (aws-chunked
	// trailers). They are verified and recorded like Checksums.
	Trailer func() (Checksums, error)
}

// hashSet computes MD5 (always, for the ETag) plus whatever Integrity asks.
type hashSet struct {
	md5    hash.Hash
	sha256 hash.Hash // for ContentSHA256 when SHA256 is not otherwise computed
	algs   map[ChecksumAlgorithm]hash.Hash
	w      io.Writer
}

func newHashSet(in *Integrity) *hashSet {
	h := &hashSet{md5: md5.New(), algs: map[ChecksumAlgorithm]hash.Hash{}}
	ws := []io.Writer{h.md5}
	add := func(a ChecksumAlgorithm) {
		if _, ok := h.algs[a]; ok {
			return
		}
		if nh := a.NewHash(); nh != nil {
			h.algs[a] = nh
			ws = append(ws, nh)
		}
	}
	for _, a := range in.Algorithms {
		add(a)
	}
	in.Checksums.Each(func(a ChecksumAlgorithm, _ string) { add(a) })
	if len(in.ContentSHA256) > 0 {
		if s, ok := h.algs[SHA256]; ok {
			h.sha256 = s
		} else {
			h.sha256 = sha256.New()
			ws = append(ws, h.sha256)
		}
	}
	h.w = io.MultiWriter(ws...)
	return h
}

func (h *hashSet) Write(p []byte) (int, error) { return h.w.Write(p) }

// verify checks the computed digests against in and returns the checksums
// to record.
func (h *hashSet) verify(in *Integrity) (Checksums, error) {
	md5sum := h.md5.Sum(nil)
	if len(in.ContentMD5) > 0 && !equalBytes(in.ContentMD5, md5sum) {
		return Checksums{}, ErrBadDigest
	}
	if h.sha256 != nil && !equalBytes(in.ContentSHA256, h.sha256.Sum(nil)) {
		return Checksums{}, ErrSHA256Mismatch
	}
	var got Checksums
	for a, hh := range h.algs {
		got.Set(a, base64.StdEncoding.EncodeToString(hh.Sum(nil)))
	}
	check := func(want Checksums) error {
		var err error
		want.Each(func(a ChecksumAlgorithm, v string) {
			if err != nil {
				return
			}
			c := got.Get(a)
			if c == "" {
				// The trailer named an algorithm nobody asked us to compute.
				err = fmt.Errorf("%w: %s checksum was not announced before the body", ErrInvalidChecksum, a)
				return
			}
			if c != v {
				err = &ChecksumMismatchError{Algorithm: a, Expected: v, Computed: c}
			}
		})
		return err
	}
	if err := check(in.Checksums); err != nil {
		return Checksums{}, err
	}
	if in.Trailer != nil {
		tr, err := in.Trailer()
		if err != nil {
			return Checksums{}, err
		}
		if err := check(tr); err != nil {
			return Checksums{}, err
		}
	}
	return got, nil
}

func equalBytes(a, b []byte) bool { return string(a) == string(b) }

// validate rejects malformed expected values before any data is read.
func (in *Integrity) validate() error {
	if len(in.ContentMD5) != 0 && len(in.ContentMD5) != md5.Size {
		return fmt.Errorf("%w: Content-MD5 must be 16 bytes", ErrInvalidChecksum)
	}
	if len(in.ContentSHA256) != 0 && len(in.ContentSHA256) != sha256.Size {
		return fmt.Errorf("%w: content SHA-256 must be 32 bytes", ErrInvalidChecksum)
	}
	for _, a := range in.Algorithms {
		if a.digestSize() == 0 {
			return fmt.Errorf("%w: unknown algorithm %q", ErrInvalidChecksum, a)
		}
	}
	var err error
	in.Checksums.Each(func(a ChecksumAlgorithm, v string) {
		if err == nil && !validChecksum(a, v) {
			err = fmt.Errorf("%w: %s value %q", ErrInvalidChecksum, a, v)
		}
	})
	return err
}

// compositeChecksum is S3's checksum of a multipart object whose checksum
// type is COMPOSITE: the checksum of the concatenated raw part checksums,
// suffixed with "-<parts>".
func compositeChecksum(a ChecksumAlgorithm, parts []string) (string, error) {
	h := a.NewHash()
	for _, p := range parts {
		raw, err := base64.StdEncoding.DecodeString(p)
		if err != nil || len(raw) != a.digestSize() {
			return "", fmt.Errorf("%w: stored part checksum %q", ErrInvalidChecksum, p)
		}
		h.Write(raw)
	}
	return fmt.Sprintf("%s-%d", base64.StdEncoding.EncodeToString(h.Sum(nil)), len(parts)), nil
}

// crcCombinable reports whether a full-object checksum can be computed for a
// multipart upload of this algorithm (S3 allows FULL_OBJECT only for CRCs).
func crcCombinable(a ChecksumAlgorithm) bool {
	return a == CRC32 || a == CRC32C || a == CRC64NVME
}

// CheckIntegrity reads r to EOF and verifies it against in the way Put
// does, without storing anything: for small request bodies that are parsed
// rather than stored (XML documents). It returns the checksums computed.
func CheckIntegrity(r io.Reader, in Integrity) (Checksums, error) {
	if err := in.validate(); err != nil {
		return Checksums{}, err
	}
	hs := newHashSet(&in)
	if _, err := io.Copy(hs, r); err != nil {
		return Checksums{}, fmt.Errorf("check integrity: %w", err)
	}
	return hs.verify(&in)
}
