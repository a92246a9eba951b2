package training

// FailureReason is the FailureReason text err carries when it is a
// problem with the job itself ("ClientError: ..."), as the runner would
// record it.
func FailureReason(err error) (string, bool) {
	if _, ok := jobReason(err); !ok {
		return "", false
	}
	return failureReason(err), true
}
