package logstore

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Pattern is a parsed FilterLogEvents filterPattern. sagebox supports the
// unstructured-text subset of CloudWatch's syntax, case-sensitively as
// CloudWatch matches:
//
//	ERROR              the message contains ERROR (terms are substrings)
//	ERROR Exception    contains both (terms separated by spaces are ANDed)
//	"Loss is"          contains the exact phrase; \" and \\ escape inside quotes
//	?ERROR ?WARN       contains at least one of the ?-terms
//	-DEBUG             does not contain DEBUG (also -"a phrase")
//	%err(or)?[0-9]+%   matches the regular expression (RE2 syntax)
//
// A message matches when it contains every plain term, none of the -terms,
// and, if there are ?-terms, at least one of them. The empty pattern
// matches everything. JSON patterns ({ $.x = ... }) and space-delimited
// patterns ([a, b]) are rejected with an error saying so.
type Pattern struct {
	all, any, none []matcher
}

// matcher is one term of a pattern.
type matcher func(msg string) bool

// ParsePattern parses a filterPattern; see Pattern for the syntax.
func ParsePattern(src string) (*Pattern, error) {
	p := &Pattern{}
	rest := strings.TrimSpace(src)
	switch {
	case strings.HasPrefix(rest, "{"):
		return nil, errors.New("JSON filter patterns ({ $.field ... }) are not supported by sagebox")
	case strings.HasPrefix(rest, "["):
		return nil, errors.New("space-delimited filter patterns ([field, ...]) are not supported by sagebox")
	}
	for rest != "" {
		var list *[]matcher
		switch rest[0] {
		case '?':
			list, rest = &p.any, rest[1:]
		case '-':
			list, rest = &p.none, rest[1:]
		default:
			list = &p.all
		}
		m, tail, err := parseTerm(rest)
		if err != nil {
			return nil, err
		}
		*list = append(*list, m)
		rest = strings.TrimLeftFunc(tail, unicode.IsSpace)
	}
	return p, nil
}

// parseTerm reads one term at the start of s and returns its matcher and
// what follows it.
func parseTerm(s string) (matcher, string, error) {
	first, _ := utf8.DecodeRuneInString(s)
	switch {
	case s == "" || unicode.IsSpace(first):
		return nil, "", errors.New("a ? or - must be followed by a term")
	case s[0] == '"':
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			switch c := s[i]; {
			case c == '\\' && i+1 < len(s):
				i++
				b.WriteByte(s[i])
			case c == '"':
				phrase := b.String()
				return func(msg string) bool { return strings.Contains(msg, phrase) }, s[i+1:], nil
			default:
				b.WriteByte(c)
			}
		}
		return nil, "", errors.New("unterminated quoted phrase")
	case s[0] == '%':
		end := strings.IndexByte(s[1:], '%')
		if end < 0 {
			return nil, "", errors.New("unterminated %regular expression%")
		}
		re, err := regexp.Compile(s[1 : 1+end])
		if err != nil {
			return nil, "", fmt.Errorf("invalid regular expression: %w", err)
		}
		return re.MatchString, s[end+2:], nil
	}
	end := strings.IndexFunc(s, unicode.IsSpace)
	if end < 0 {
		end = len(s)
	}
	term := s[:end]
	return func(msg string) bool { return strings.Contains(msg, term) }, s[end:], nil
}

// Match reports whether msg matches the pattern. A nil pattern matches
// everything.
func (p *Pattern) Match(msg string) bool {
	if p == nil {
		return true
	}
	for _, m := range p.all {
		if !m(msg) {
			return false
		}
	}
	for _, m := range p.none {
		if m(msg) {
			return false
		}
	}
	if len(p.any) == 0 {
		return true
	}
	for _, m := range p.any {
		if m(msg) {
			return true
		}
	}
	return false
}
