"""The style router: the role AWS Lambda and API Gateway play in front of the
style endpoints, as a stdlib HTTP server.

  POST /style   {"data": "<base64 picture>", "style": "<name>"}
                → InvokeEndpoint on endpoint style-<name> (ContentType image/jpeg,
                  or image/png for a PNG) → the endpoint's JSON as is:
                  {"prediction": "<base64 PNG>"}
                400 {"error": ...} for bad JSON, bad base64 or an unknown style;
                502 {"error": ...} when the endpoint fails.
  GET  /styles  {"styles": [names]}
  GET  /        the web page (index.html): upload a picture, pick a style, see it.

Endpoints (sagebox server or AWS):
  python3 router.py --endpoint-url http://127.0.0.1:7070 --styles sepia,sketch,dream
Direct, for local development without endpoints: each style answered by a
model server (`sagebox model-server --model-data models/sepia/model.tar.gz --port 9001`):
  python3 router.py --direct sepia=http://127.0.0.1:9001 --direct sketch=http://127.0.0.1:9002
"""
import argparse
import base64
import binascii
import json
import os
import sys
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
MAX_BODY = 16 << 20  # base64 of the 6 MB payload limit, with room to spare


class RequestError(Exception):
    """Something the caller must fix: answered with its status and message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class EndpointInvoker:
    """Invokes style-<name> through sagemaker-runtime."""

    def __init__(self, styles, endpoint_url=None, region="us-east-1", prefix="style-"):
        import boto3
        from botocore.config import Config

        kw = dict(region_name=region, config=Config(retries={"max_attempts": 1}, read_timeout=70))
        if endpoint_url:
            kw["endpoint_url"] = endpoint_url
        if not os.environ.get("AWS_ACCESS_KEY_ID"):  # sagebox accepts any key on loopback
            kw.update(aws_access_key_id="sagebox", aws_secret_access_key="sagebox")
        self.runtime = boto3.client("sagemaker-runtime", **kw)
        self.endpoints = {s: prefix + s for s in styles}

    def styles(self):
        return list(self.endpoints)

    def invoke(self, style, body, content_type):
        try:
            resp = self.runtime.invoke_endpoint(EndpointName=self.endpoints[style], Body=body,
                                                ContentType=content_type, Accept="application/json")
        except self.runtime.exceptions.ClientError as e:
            raise RequestError(502, f"endpoint {self.endpoints[style]}: {e}") from e
        return resp["Body"].read()


class DirectInvoker:
    """Posts to each style's model server's /invocations (no endpoints)."""

    def __init__(self, urls):
        self.urls = urls

    def styles(self):
        return list(self.urls)

    def invoke(self, style, body, content_type):
        req = urllib.request.Request(self.urls[style].rstrip("/") + "/invocations", data=body, method="POST",
                                     headers={"Content-Type": content_type, "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=70) as resp:
                return resp.read()
        except urllib.error.HTTPError as e:
            raise RequestError(502, f"model server for {style}: {e.code} {e.read().decode(errors='replace')}") from e
        except OSError as e:
            raise RequestError(502, f"model server for {style}: {e}") from e


def parse_request(raw, styles):
    """→ (style, picture bytes, content type), or RequestError(400)."""
    try:
        req = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise RequestError(400, f"the body is not JSON: {e}") from e
    if not isinstance(req, dict):
        raise RequestError(400, 'send a JSON object: {"data": "<base64 picture>", "style": "<name>"}')
    style = req.get("style")
    if style not in styles:
        raise RequestError(400, f"unknown style {style!r}; choose one of: {', '.join(styles)}")
    data = req.get("data")
    if not isinstance(data, str) or not data:
        raise RequestError(400, '"data" must be the picture as a base64 string')
    if data.startswith("data:") and "," in data:  # a data URL, as FileReader gives it
        data = data.split(",", 1)[1]
    try:
        picture = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as e:
        raise RequestError(400, f'"data" is not valid base64: {e}') from e
    if picture.startswith(b"\x89PNG\r\n\x1a\n"):
        return style, picture, "image/png"
    if picture.startswith(b"\xff\xd8\xff"):
        return style, picture, "image/jpeg"
    raise RequestError(400, '"data" is neither a JPEG nor a PNG picture')


def make_handler(invoker):
    with open(os.path.join(HERE, "index.html"), "rb") as f:
        page = f.read()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def send(self, status, body, content_type="application/json"):
            if isinstance(body, dict):
                body = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path in ("/", "/index.html"):
                self.send(200, page, "text/html; charset=utf-8")
            elif self.path == "/styles":
                self.send(200, {"styles": invoker.styles()})
            else:
                self.send(404, {"error": f"no such page {self.path}"})

        def do_POST(self):
            try:
                if self.path != "/style":
                    raise RequestError(404, f"POST /style, not {self.path}")
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY:
                    self.close_connection = True
                    raise RequestError(413, f"the request is over {MAX_BODY >> 20} MB")
                style, picture, content_type = parse_request(self.rfile.read(length), invoker.styles())
                self.send(200, invoker.invoke(style, picture, content_type))
            except RequestError as e:
                self.send(e.status, {"error": str(e)})

        def log_message(self, fmt, *args):
            sys.stderr.write("router: " + fmt % args + "\n")

    return Handler


def serve(invoker, listen):
    host, _, port = listen.rpartition(":")
    httpd = ThreadingHTTPServer((host or "127.0.0.1", int(port)), make_handler(invoker))
    httpd.daemon_threads = True
    print(f"router listening on http://{httpd.server_address[0]}:{httpd.server_address[1]}/", flush=True)
    return httpd


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--listen", default="127.0.0.1:8000", help="HOST:PORT (port 0: a free one)")
    p.add_argument("--endpoint-url", default=os.environ.get("SAGEBOX_ENDPOINT"),
                   help="sagemaker-runtime endpoint URL (default $SAGEBOX_ENDPOINT, else AWS)")
    p.add_argument("--region", default=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    p.add_argument("--styles", default="sepia,sketch,dream", help="comma-separated; endpoint style-<name> each")
    p.add_argument("--direct", action="append", default=[], metavar="STYLE=URL",
                   help="answer STYLE from the model server at URL instead of an endpoint; repeatable")
    args = p.parse_args()
    if args.direct:
        invoker = DirectInvoker(dict(d.split("=", 1) for d in args.direct))
    else:
        invoker = EndpointInvoker([s for s in args.styles.split(",") if s], args.endpoint_url, args.region)
    httpd = serve(invoker, args.listen)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
