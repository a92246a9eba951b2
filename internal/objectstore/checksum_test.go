package objectstore

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func TestChecksumKnownValues(t *testing.T) {
	// Check values of the catalogued CRC definitions for "123456789".
	tests := []struct {
		alg  ChecksumAlgorithm
		want []byte
	}{
		{CRC32, binary.BigEndian.AppendUint32(nil, 0xcbf43926)},
		{CRC32C, binary.BigEndian.AppendUint32(nil, 0xe3069283)},
		{CRC64NVME, binary.BigEndian.AppendUint64(nil, 0xae8b14860a799888)},
	}
	for _, tt := range tests {
		t.Run(string(tt.alg), func(t *testing.T) {
			got, err := ComputeChecksum(tt.alg, strings.NewReader("123456789"))
			if err != nil {
				t.Fatal(err)
			}
			if got != b64(tt.want) {
				t.Fatalf("%s = %s, want %s", tt.alg, got, b64(tt.want))
			}
		})
	}
	if a, ok := ParseChecksumAlgorithm("crc32c"); !ok || a != CRC32C || a.Header() != "x-amz-checksum-crc32c" {
		t.Fatalf("ParseChecksumAlgorithm(crc32c) = %v, %v", a, ok)
	}
	if _, ok := ParseChecksumAlgorithm("md5"); ok {
		t.Fatal("md5 accepted as an additional checksum")
	}
}

func TestPutIntegrity(t *testing.T) {
	ctx := context.Background()
	body := "the quick brown fox"
	md5sum := md5.Sum([]byte(body))
	shasum := sha256.Sum256([]byte(body))
	sums := Checksums{}
	for _, a := range AllChecksumAlgorithms() {
		v, err := ComputeChecksum(a, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		sums.Set(a, v)
	}
	wrong := b64(make([]byte, 4))
	tests := []struct {
		name  string
		in    Integrity
		want  error
		store Checksums
	}{
		{name: "nothing to check", in: Integrity{}},
		{name: "right md5", in: Integrity{ContentMD5: md5sum[:]}},
		{name: "wrong md5", in: Integrity{ContentMD5: make([]byte, 16)}, want: ErrBadDigest},
		{name: "right sha256", in: Integrity{ContentSHA256: shasum[:]}},
		{name: "wrong sha256", in: Integrity{ContentSHA256: make([]byte, 32)}, want: ErrSHA256Mismatch},
		{name: "all right checksums", in: Integrity{Checksums: sums}, store: sums},
		{name: "wrong crc32", in: Integrity{Checksums: Checksums{CRC32: wrong}}, want: ErrChecksumMismatch},
		{name: "wrong crc32c", in: Integrity{Checksums: Checksums{CRC32C: wrong}}, want: ErrChecksumMismatch},
		{name: "wrong sha1", in: Integrity{Checksums: Checksums{SHA1: b64(make([]byte, 20))}}, want: ErrChecksumMismatch},
		{name: "wrong sha256 checksum", in: Integrity{Checksums: Checksums{SHA256: b64(make([]byte, 32))}}, want: ErrChecksumMismatch},
		{name: "wrong crc64nvme", in: Integrity{Checksums: Checksums{CRC64NVME: b64(make([]byte, 8))}}, want: ErrChecksumMismatch},
		{name: "malformed checksum", in: Integrity{Checksums: Checksums{CRC32: "not base64"}}, want: ErrInvalidChecksum},
		{name: "short checksum", in: Integrity{Checksums: Checksums{SHA256: wrong}}, want: ErrInvalidChecksum},
		{name: "algorithm only", in: Integrity{Algorithms: []ChecksumAlgorithm{CRC32}}, store: Checksums{CRC32: sums.CRC32}},
		{
			name:  "right trailer",
			in:    Integrity{Algorithms: []ChecksumAlgorithm{CRC32}, Trailer: func() (Checksums, error) { return Checksums{CRC32: sums.CRC32}, nil }},
			store: Checksums{CRC32: sums.CRC32},
		},
		{
			name: "wrong trailer",
			in:   Integrity{Algorithms: []ChecksumAlgorithm{CRC32}, Trailer: func() (Checksums, error) { return Checksums{CRC32: wrong}, nil }},
			want: ErrChecksumMismatch,
		},
		{
			name: "trailer with an unannounced algorithm",
			in:   Integrity{Algorithms: []ChecksumAlgorithm{CRC32}, Trailer: func() (Checksums, error) { return Checksums{CRC32C: sums.CRC32C}, nil }},
			want: ErrInvalidChecksum,
		},
		{
			name: "trailer error",
			in:   Integrity{Trailer: func() (Checksums, error) { return Checksums{}, errors.New("bad trailer") }},
			want: errors.New("any"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestStore(t)
			mustBucket(t, s, "bkt")
			info, err := s.Put(ctx, "bkt", "k", strings.NewReader(body), PutOptions{Integrity: tt.in})
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				st, err := s.Stat(ctx, "bkt", "k")
				if err != nil {
					t.Fatal(err)
				}
				if st.Checksums != tt.store || info.Checksums != tt.store {
					t.Fatalf("stored checksums %+v, want %+v", st.Checksums, tt.store)
				}
				return
			}
			if err == nil {
				t.Fatal("put succeeded, want an error")
			}
			if tt.want.Error() != "any" && !errors.Is(err, tt.want) {
				t.Fatalf("put = %v, want %v", err, tt.want)
			}
			var cm *ChecksumMismatchError
			if errors.Is(tt.want, ErrChecksumMismatch) && !errors.As(err, &cm) {
				t.Fatalf("checksum mismatch is not a *ChecksumMismatchError: %v", err)
			}
			if _, err := s.Stat(ctx, "bkt", "k"); !errors.Is(err, ErrNoSuchKey) {
				t.Fatalf("object stored despite failed verification: %v", err)
			}
			if data, tmp := dataFiles(t, s); data != 0 || tmp != 0 {
				t.Fatalf("data=%d tmp=%d after failed verification", data, tmp)
			}
		})
	}
}
