package objectstore

import (
	"fmt"
	"net/netip"
	"strings"
	"unicode/utf8"
)

// MaxKeyLength is S3's limit on the UTF-8 length of an object key.
const MaxKeyLength = 1024

// ValidateBucketName checks a bucket name against S3's rules for general
// purpose buckets: 3–63 characters of lower-case letters, digits, dots and
// hyphens, starting and ending with a letter or digit, no "..", not shaped
// like an IPv4 address, none of the reserved prefixes and suffixes. A name
// can therefore never start with "_", which keeps /_sagebox/ free.
func ValidateBucketName(name string) error {
	if len(name) < 3 || len(name) > 63 {
		return fmt.Errorf("%w: %q must be 3 to 63 characters long", ErrInvalidBucketName, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '.' || c == '-':
			if i == 0 || i == len(name)-1 {
				return fmt.Errorf("%w: %q must start and end with a letter or digit", ErrInvalidBucketName, name)
			}
		default:
			return fmt.Errorf("%w: %q may hold only lower-case letters, digits, '.' and '-'", ErrInvalidBucketName, name)
		}
	}
	if strings.Contains(name, "..") || strings.Contains(name, ".-") || strings.Contains(name, "-.") {
		return fmt.Errorf("%w: %q has adjacent punctuation", ErrInvalidBucketName, name)
	}
	if a, err := netip.ParseAddr(name); err == nil && a.Is4() {
		return fmt.Errorf("%w: %q is formatted as an IP address", ErrInvalidBucketName, name)
	}
	for _, p := range []string{"xn--", "sthree-", "amzn-s3-demo-"} {
		if strings.HasPrefix(name, p) {
			return fmt.Errorf("%w: %q uses the reserved prefix %q", ErrInvalidBucketName, name, p)
		}
	}
	for _, s := range []string{"-s3alias", "--ol-s3", "--x-s3", "--table-s3"} {
		if strings.HasSuffix(name, s) {
			return fmt.Errorf("%w: %q uses the reserved suffix %q", ErrInvalidBucketName, name, s)
		}
	}
	return nil
}

// ValidateKey checks an object key: 1 to 1024 bytes of valid UTF-8. Any
// character is allowed, including "/", "..", spaces, "+" and "%"; keys never
// become file names.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	case len(key) > MaxKeyLength:
		return ErrKeyTooLong
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: key is not valid UTF-8", ErrInvalidKey)
	}
	return nil
}
