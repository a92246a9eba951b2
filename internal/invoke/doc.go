// Package invoke is sagebox's data plane: sagemaker-runtime's
// InvokeEndpoint (POST /endpoints/{name}/invocations), forwarded to one
// instance (a `sagebox model-server`) of the endpoint.
//
// Hosting publishes each endpoint's serving fleet in a Table (its one
// writer); every invocation reads the table without a lock. A request
// goes to a variant by weight (or the one TargetVariant names) and, within
// it, to the instance with the fewest requests in flight, over a pooled
// keep-alive HTTP client (Unix sockets or loopback TCP).
//
// Hosting drains an instance by leaving it out of a Set and waiting until
// Table.Outstanding reads 0: a request counts its instance before it
// checks that the table it picked from is still current, so none can slip
// past a drain.
//
// Answers, and why:
//   - 2xx from the instance: 200 with its body and its Content-Type
//     exactly as sent (the SageMaker SDK's deserializers compare it by
//     string), X-Amzn-Invoked-Production-Variant, and the custom
//     attributes the model set.
//   - Any other status from the instance (the model server's own 503
//     QueueFull and 507 included): 424 ModelError with
//     OriginalStatusCode, OriginalMessage and LogStreamArn, naming the
//     container from the instance's X-Sagebox-Container header. Never a
//     5xx for the model's own error: botocore retries 5xx and would run
//     predict_fn again.
//   - Timeout (Config.Timeout, 60 s) or a connection that breaks after the
//     request was sent (the instance crashed): 424 ModelError with status
//     0, as SageMaker answers a timeout. The request reached the model, so
//     it is not retried here and the client is not invited to either.
//   - The connection cannot be made (the instance was just replaced or
//     drained): nothing was sent, so the request is tried on a fresh
//     lookup on another instance, a few times with short waits; if none
//     accepts it, 503 ServiceUnavailable, which clients may safely retry.
//   - A client that hangs up does not cancel the instance's work (the
//     model server would finish it anyway); its answer is dropped.
//   - Sagebox's own refusals (missing endpoint, not serving, bad headers,
//     unknown variant, Direct-mode hostname, TargetModel) are 400
//     ValidationError; a body over the 6 MB limit is 413, read no further.
package invoke
