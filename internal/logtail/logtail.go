// Package logtail cuts what a log pump read from a growing output file
// into log lines. Training hosts and endpoint instances both write their
// output to a file their supervisor appends to; the pumps that move it
// into the log store read it from a saved offset and split it here.
package logtail

import "bytes"

// SplitLines cuts buf into lines without their "\n", each at most maxLen
// bytes (a longer line comes back in pieces of maxLen). An unfinished last
// line is left for the next read unless final is set (the writer has
// ended). It returns the lines and how many bytes of buf they consumed.
func SplitLines(buf []byte, maxLen int, final bool) (lines []string, consumed int) {
	for len(buf) > 0 {
		i := bytes.IndexByte(buf, '\n')
		switch {
		case i >= 0 && i <= maxLen:
			lines = append(lines, string(buf[:i]))
			consumed += i + 1
			buf = buf[i+1:]
			continue
		case len(buf) >= maxLen:
			lines = append(lines, string(buf[:maxLen]))
			consumed += maxLen
			buf = buf[maxLen:]
			continue
		case final:
			lines = append(lines, string(buf))
			consumed += len(buf)
		}
		break
	}
	return lines, consumed
}
