// Package sigv4 verifies AWS Signature Version 4 requests on the server
// side, for every API sagebox speaks on its one address: S3 (service "s3")
// and the JSON services (SageMaker, CloudWatch Logs, STS, ...).
//
// It covers the Authorization-header form and the presigned query form,
// S3's single-encoded canonical URI versus the double encoding of every
// other service, the payload hash (x-amz-content-sha256 for S3, the hashed
// body otherwise), the 15-minute clock skew, and the streaming
// (aws-chunked) chunk and trailer signatures, for which it exports the
// signing key, scope and seed signature (Result, ChunkSigner).
//
// Failures are *Error values whose Kind maps to the S3 XML error code
// (SignatureDoesNotMatch, InvalidAccessKeyId, RequestTimeTooSkewed,
// AccessDenied, ...) or the JSON __type (InvalidSignatureException,
// UnrecognizedClientException, MissingAuthenticationTokenException, ...),
// so each API renders them its own way.
//
// For S3 it also accepts Signature Version 2 (the "AWS id:sig" header and
// AWSAccessKeyId/Expires/Signature presigned URLs), which botocore still
// uses for presigned S3 URLs by default.
//
// For S3 the verifier trusts the x-amz-content-sha256 value it signs and
// leaves the body alone; the S3 handler checks a hex value against the bytes
// it stores, and chunk signatures as it decodes them. Every other service's
// body is hashed (UNSIGNED-PAYLOAD is S3's alone), and only after all that
// the headers prove has been checked: the key, the date and skew, and the
// credential scope against the Route (the service addressed) and the
// server's region (WithRegion). A body longer than the Route's MaxBody is
// refused unread when its length is declared, and cut at the cap when it is
// not, so a forged request costs the server at most that cap.
package sigv4
