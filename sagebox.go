// Package sagebox holds the domain vocabulary shared by every part of sagebox:
// the shapes of training jobs as the SageMaker API describes them, their
// status enums, and the error type that carries an AWS error code.
//
// It imports only the standard library. Everything that does I/O lives under
// internal/ and speaks in these types.
package sagebox

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Time is a timestamp that travels as epoch seconds, the way the SageMaker
// JSON 1.1 protocol encodes timestamps. It accepts integers and fractional
// numbers on input and writes seconds with millisecond precision.
type Time struct{ time.Time }

// NewTime wraps t (rounded to milliseconds) as a *Time.
func NewTime(t time.Time) *Time { return &Time{t.Round(time.Millisecond)} }

// MarshalJSON writes epoch seconds as a JSON number.
func (t Time) MarshalJSON() ([]byte, error) {
	ms := t.UnixMilli()
	if ms%1000 == 0 {
		return []byte(strconv.FormatInt(ms/1000, 10)), nil
	}
	return []byte(strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64)), nil
}

// UnmarshalJSON reads epoch seconds given as an integer or a float.
func (t *Time) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("timestamp must be epoch seconds: %w", err)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("timestamp must be a finite number")
	}
	sec, frac := math.Modf(f)
	t.Time = time.Unix(int64(sec), int64(frac*1e9)).UTC().Round(time.Millisecond)
	return nil
}
