// Package wire is the Go side of the protocol between the model server's
// front end and its Python workers (python/sagebox_runtime/wire.py is the
// other side). The protocol is deliberately small; TorchServe's OTF protocol
// is its ancestor, with one message per batch.
//
// # Transport
//
// A Unix stream socket. The Go front end listens on a fresh socket path and
// starts the worker with that path; the worker connects, so there is no
// polling for readiness. One connection per worker. The worker answers the
// frames it reads one by one, in order. The front end has one INFER in
// flight per worker, except with batching off: then it may write several
// single-request INFERs back to back (at most 8) and read their RESULTs in
// the same order. A worker given a progress page (LOAD's "progress") may
// hold a RESULT back while the next INFER has already arrived and write
// several RESULTs at once; it then keeps the page up to date.
//
// # Progress page
//
// A file of 4096 bytes that the front end creates and both sides map:
//
//	u64 id of the first request of the INFER the worker is handling
//	u64 CLOCK_MONOTONIC nanoseconds when its handlers started; 0 once done
//	u64 recycle request: 0, 1 (a handler raised MemoryError) or 2 (peak
//	    RSS passed LOAD's max_rss)
//
// little-endian, at offset 0, written by the worker before and after each
// INFER's handlers. The front end reads it when the worker dies or an
// answer is late, to tell which request was running and for how long.
// A worker writes a recycle request before the RESULT after which it must
// be replaced, then reads and ignores frames until EOF; the front end
// checks the word after every RESULT, requeues the INFERs it wrote after
// that one, and kills the worker.
//
// # Framing
//
// Every message is a frame:
//
//	u32  length of what follows (type byte + payload), big-endian
//	u8   type
//	...  payload
//
// Integers are big-endian. A "str" or "bytes" is a u32 length followed by
// that many bytes (UTF-8 for str). A frame larger than its reader's maximum
// is a protocol error; the front end reads RESULT frames of up to LOAD's
// max_answer × batch size + 1 MiB.
//
// # Messages
//
//	0x01 HELLO   worker → front end, first frame after connecting.
//	             JSON {"version": 1, "pid": <int>, "python": "<version>"}
//	0x02 LOAD    front end → worker. JSON {"model_dir": str, "program": str
//	             (SAGEMAKER_PROGRAM, default "inference.py"), "gpu_id": int
//	             (-1 on CPU), "batch_size": int, "worker_id": int,
//	             "workers": int (pool size, to size CPU thread pools),
//	             "server_name": "sagebox", "server_version": str,
//	             "default_accept": str, "progress": str (optional: the
//	             progress page's path), "max_answer": int (optional: the
//	             most bytes of body, content type and header names and
//	             values one answer may carry; the worker answers a larger
//	             one with a 500 of its own instead, and cuts error strings
//	             that would not fit), "max_rss": int (optional: bytes of
//	             peak RSS past which the worker asks to be recycled),
//	             "code_dir": str (optional: the user code's directory;
//	             absent means <model_dir>/code), "original_request": bool
//	             (optional: every INFER element carries the original
//	             request; set for the stages after the first of a serial
//	             inference pipeline)}
//	0x03 LOADED  worker → front end. JSON {"ok": true, "batch_aware": bool}
//	             or {"ok": false, "error": {"type": str, "message": str,
//	             "traceback": str}}. model_fn has run exactly once when ok.
//	0x04 INFER   front end → worker, one batch:
//	               u32 n
//	               n × { u64 id | str content_type | str accept
//	                     | u32 nh | nh × {str name | str value}   (request headers)
//	                     | bytes body
//	                     [ | str orig_content_type | str orig_accept
//	                       | bytes orig_body ]   (only with LOAD's original_request) }
//	0x05 RESULT  worker → front end, the answer to one INFER:
//	               u64 handler_nanos   (time spent in user/default handler code)
//	               u32 n               (must equal the INFER's n, same ids)
//	               n × { u64 id | u16 status | str content_type
//	                     | u32 nh | nh × {str name | str value}  (response headers)
//	                     | bytes body
//	                     | str error_type | str error_message | str traceback }
//	             status < 400: body is the response. status >= 400: the request
//	             failed alone; error_* say why (body is ignored).
//	0x06 PING    front end → worker (liveness probe, optional).
//	0x07 PONG    worker → front end.
//
// In INFER, content_type and accept are the raw Content-Type and Accept
// header values ("" when absent, MIME parameters included); the worker
// applies default_accept when accept is "" or "*/*". Header names arrive
// as the front end received them (Go's canonical form, e.g.
// X-Amzn-Sagemaker-Custom-Attributes), so the worker compares them
// case-insensitively. The front end copies response headers onto the HTTP
// response as given.
//
// The orig_* fields are the request the model server received, as a
// serial inference pipeline's later stages see it
// (context.original_request): the first stage's own request is the
// original, so it and single-container servers never carry them, and a
// large original body travels as its own buffer of the vectored write
// (not copied).
//
// A worker that receives anything it does not understand exits with a
// message on stderr; the front end treats a closed socket as a crash. To
// stop a worker the front end closes the connection; the worker then exits
// with status 0 (SIGTERM to its process group follows after a grace period).
//
// testdata/ holds golden frames that both sides' tests read; its README
// describes them.
package wire
