"""boto3's sagemaker-runtime client against sagebox's router + invoke stack.

argv: endpoint URL, endpoint name. Prints one JSON object.
"""
import json
import sys

import boto3
import botocore.config
from botocore.exceptions import ClientError

url, name = sys.argv[1], sys.argv[2]
client = boto3.client(
    "sagemaker-runtime",
    endpoint_url=url,
    region_name="us-west-2",
    aws_access_key_id="AKIDTEST",
    aws_secret_access_key="secret",
    # The SDK's own settings (session.py): botocore's default retries.
    config=botocore.config.Config(read_timeout=80, retries={"max_attempts": 5, "mode": "legacy"}),
)
out = {}

r = client.invoke_endpoint(
    EndpointName=name,
    Body=b"\x93NUMPY\x01\x00payload",
    ContentType="application/x-npy",
    Accept="application/x-npy",
    CustomAttributes="trace=abc",
    TargetVariant="AllTraffic",
    InferenceId="inf-1",
)
out["ok"] = {
    "body": r["Body"].read().decode("latin-1"),
    "content_type": r["ContentType"],
    "variant": r["InvokedProductionVariant"],
    "custom": r.get("CustomAttributes"),
}


def error_of(**kw):
    try:
        client.invoke_endpoint(EndpointName=kw.pop("EndpointName", name), Body=b"x", **kw)
    except ClientError as e:
        return {
            "code": e.response["Error"]["Code"],
            "message": e.response["Error"]["Message"],
            "status": e.response["ResponseMetadata"]["HTTPStatusCode"],
            "retries": e.response["ResponseMetadata"].get("RetryAttempts"),
            "original_status": e.response.get("OriginalStatusCode"),
            "original_message": e.response.get("OriginalMessage"),
            "log_stream_arn": e.response.get("LogStreamArn"),
        }
    return None


out["client_error"] = error_of(Accept="fail-400")
out["server_error"] = error_of(Accept="fail-500")
out["missing"] = error_of(EndpointName="no-such-endpoint")
out["bad_variant"] = error_of(TargetVariant="Nope")
try:
    client.invoke_endpoint(EndpointName=name, Body=b"a" * (6 * 1024 * 1024 + 1))
    out["too_large"] = None
except ClientError as e:
    out["too_large"] = {"code": e.response["Error"]["Code"], "status": e.response["ResponseMetadata"]["HTTPStatusCode"],
                        "retries": e.response["ResponseMetadata"].get("RetryAttempts")}
except Exception as e:  # a connection error instead of the answer
    out["too_large"] = {"code": type(e).__name__, "status": 0, "message": str(e)}
print(json.dumps(out))
