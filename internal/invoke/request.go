package invoke

import (
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"
)

// namePattern is the pattern of EndpointName, TargetVariant and
// TargetContainerHostname.
const namePattern = "^[a-zA-Z0-9](-*[a-zA-Z0-9])*"

// parseRequest reads and checks an InvokeEndpoint's name and headers, with
// AWS's constraints and message style.
func parseRequest(name string, hdr http.Header) (*request, *apiError) {
	req := &request{endpoint: name}
	var errs []string
	if !validName(name, 63) {
		errs = append(errs, constraint(name, "endpointName", nameRule(name, 63)))
	}
	req.contentType = hdr.Get("Content-Type")
	if s := asciiRule(req.contentType, 1024); s != "" {
		errs = append(errs, constraint(req.contentType, "contentType", s))
	}
	req.accept = hdr.Get("Accept")
	if s := asciiRule(req.accept, 1024); s != "" {
		errs = append(errs, constraint(req.accept, "accept", s))
	}
	if vs, ok := hdr[HeaderCustomAttributes]; ok {
		req.hasCustomAttrs = true
		if len(vs) > 0 {
			req.customAttrs = vs[0]
		}
		if s := asciiRule(req.customAttrs, 1024); s != "" {
			errs = append(errs, constraint(req.customAttrs, "customAttributes", s))
		}
	}
	if v := hdr.Get(HeaderTargetVariant); v != "" {
		req.targetVariant = v
		if !validName(v, 63) {
			errs = append(errs, constraint(v, "targetVariant", nameRule(v, 63)))
		}
	}
	if v := hdr.Get(HeaderTargetContainer); v != "" {
		req.targetContainer = v
		if !validName(v, 63) {
			errs = append(errs, constraint(v, "targetContainerHostname", nameRule(v, 63)))
		}
	}
	if vs, ok := hdr[HeaderInferenceID]; ok {
		if len(vs) > 0 {
			req.inferenceID = vs[0]
		}
		if s := inferenceIDRule(req.inferenceID); s != "" {
			errs = append(errs, constraint(req.inferenceID, "inferenceId", s))
		}
	}
	if len(errs) > 0 {
		msg := strconv.Itoa(len(errs)) + " validation error"
		if len(errs) > 1 {
			msg += "s"
		}
		msg += " detected: "
		for i, e := range errs {
			if i > 0 {
				msg += "; "
			}
			msg += e
		}
		return nil, validationf("%s", msg)
	}
	if v := hdr.Get(HeaderTargetModel); v != "" {
		return nil, validationf("TargetModel %q is for multi-model endpoints, which sagebox does not host; endpoint %s serves one model: send the request without TargetModel.", v, name)
	}
	return req, nil
}

func constraint(value, member, rule string) string {
	return fmt.Sprintf("Value '%s' at '%s' failed to satisfy constraint: %s", value, member, rule)
}

// validName matches namePattern with at most max characters.
func validName(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	if !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !alnum(s[i]) && s[i] != '-' {
			return false
		}
	}
	return true
}

func nameRule(s string, max int) string {
	if len(s) > max {
		return fmt.Sprintf("Member must have length less than or equal to %d", max)
	}
	return "Member must satisfy regular expression pattern: " + namePattern
}

// asciiRule says which constraint s breaks of \p{ASCII}* with at most max
// characters, or "".
func asciiRule(s string, max int) string {
	if len(s) > max {
		return fmt.Sprintf("Member must have length less than or equal to %d", max)
	}
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return `Member must satisfy regular expression pattern: \p{ASCII}*`
		}
	}
	return ""
}

// inferenceIDRule checks InferenceId: 1 to 64 characters,
// \A\S[\p{Print}]*\z.
func inferenceIDRule(s string) string {
	n := utf8.RuneCountInString(s)
	switch {
	case n < 1:
		return "Member must have length greater than or equal to 1"
	case n > 64:
		return "Member must have length less than or equal to 64"
	}
	for i, r := range s {
		if r < 0x20 || r == 0x7f || (i == 0 && r == ' ') || r == utf8.RuneError {
			return `Member must satisfy regular expression pattern: \A\S[\p{Print}]*\z`
		}
	}
	return ""
}

func itoa(n int) string { return strconv.Itoa(n) }
