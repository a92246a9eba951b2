// Package s3api serves the S3 REST-XML API over an objectstore.Store, so
// that boto3, the AWS CLI and aws-sdk-go-v2 work against sagebox with only
// an endpoint URL changed.
//
// It covers buckets (create, head, delete, list, location), objects (put,
// get with ranges, part numbers and conditions, head, delete, batch delete,
// copy), ListObjects v1 and v2, and multipart uploads. Request bodies in
// every aws-chunked variant are decoded (and their chunk signatures checked
// when the request was verified), Content-MD5, x-amz-content-sha256 and
// x-amz-checksum-* are verified against the stored bytes, and errors are the
// XML documents S3 sends. Path-style and virtual-host-style addressing both
// work.
//
// # Wiring
//
// The server sends every request that is not a JSON API call, a runtime
// invocation or a /_sagebox/ route to the Handler. With credentials
// configured, either put sigv4's middleware in front (it stores the
// verification result in the request context, where the Handler finds
// what it needs to check the chunk signatures of signed aws-chunked
// bodies) and render its failures with WriteError, or set
// Config.Verifier and let the Handler verify S3 requests itself.
//
// Route to the Handler without cleaning the path (http.ServeMux redirects
// "//" and ".." to a cleaned path): "a//b" and "../x" are valid keys.
package s3api
