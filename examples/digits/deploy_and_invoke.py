"""Deploys the digits model a finished training job produced, invokes it with
the held-out test rows and prints the accuracy; then deletes the endpoint, its
config and the model (unless --keep).

Plain boto3 against the SageMaker API, as on AWS: the sagebox server is the
endpoint_url of both `sagemaker` and `sagemaker-runtime`.

  python3 deploy_and_invoke.py --job digits-2026-12-03-14-00-00-000 --test-csv data/test.csv

The job's model.tar.gz holds model.pth only; like the SageMaker Python SDK's
PyTorchModel(entry_point="inference.py") this script repacks it with
code/inference.py and uploads the result next to the original.

--direct URL skips the deployment and sends the same requests to a model
server's /invocations (e.g. `sagebox model-server --model-data model.tar.gz`).
"""
import argparse
import io
import json
import os
import sys
import tarfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-inference:1.13.1-cpu-py39"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--job", help="finished training job whose ModelArtifacts to deploy")
    src.add_argument("--model-data", help="s3:// URI of a model.tar.gz (model.pth, no code)")
    src.add_argument("--direct", metavar="URL", help="invoke this model server instead of deploying")
    p.add_argument("--test-csv", required=True, help="held-out rows: label, then 64 pixel values")
    p.add_argument("--name", default="digits", help="name of the model, endpoint config and endpoint")
    p.add_argument("--endpoint-url", default=os.environ.get("SAGEBOX_ENDPOINT", "http://127.0.0.1:7070"))
    p.add_argument("--region", default=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    p.add_argument("--instance-type", default="ml.m5.large")
    p.add_argument("--instance-count", type=int, default=1)
    p.add_argument("--batch", type=int, default=64, help="rows per InvokeEndpoint request")
    p.add_argument("--content-type", default="text/csv", choices=["text/csv", "application/json", "application/x-npy"])
    p.add_argument("--min-accuracy", type=float, default=0.0, help="exit 1 below this accuracy")
    p.add_argument("--timeout", type=float, default=300, help="seconds to wait for InService")
    p.add_argument("--keep", action="store_true", help="leave the endpoint, config and model in place")
    return p.parse_args()


def clients(args):
    import boto3

    kw = dict(endpoint_url=args.endpoint_url, region_name=args.region)
    if not os.environ.get("AWS_ACCESS_KEY_ID"):  # sagebox accepts any key on loopback
        kw.update(aws_access_key_id="sagebox", aws_secret_access_key="sagebox")
    return boto3.client("sagemaker", **kw), boto3.client("sagemaker-runtime", **kw), boto3.client("s3", **kw)


def split_s3(uri):
    bucket, _, key = uri[len("s3://"):].partition("/")
    return bucket, key


def repack(s3, model_data, name):
    """model.tar.gz + code/inference.py → s3://<bucket>/<name>/model.tar.gz."""
    bucket, key = split_s3(model_data)
    original = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(original), mode="r:gz") as src, tarfile.open(fileobj=out, mode="w:gz") as dst:
        for member in src.getmembers():
            if member.name.lstrip("./").startswith("code/"):
                continue
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        dst.add(os.path.join(HERE, "inference.py"), arcname="code/inference.py")
    new_key = f"{name}/model.tar.gz"
    s3.put_object(Bucket=bucket, Key=new_key, Body=out.getvalue())
    return f"s3://{bucket}/{new_key}"


def wait_in_service(sm, endpoint, timeout):
    deadline = time.monotonic() + timeout
    while True:
        d = sm.describe_endpoint(EndpointName=endpoint)
        status = d["EndpointStatus"]
        if status == "InService":
            return
        if status == "Failed":
            sys.exit(f"endpoint {endpoint} failed: {d.get('FailureReason')}")
        if time.monotonic() > deadline:
            sys.exit(f"endpoint {endpoint} still {status} after {timeout:.0f} s")
        time.sleep(0.25)


def deploy(args, sm, s3):
    model_data = args.model_data
    if args.job:
        job = sm.describe_training_job(TrainingJobName=args.job)
        if job["TrainingJobStatus"] != "Completed":
            sys.exit(f"training job {args.job} is {job['TrainingJobStatus']}, not Completed")
        model_data = job["ModelArtifacts"]["S3ModelArtifacts"]
    model_data = repack(s3, model_data, args.name)
    print(f"deploying {model_data} as endpoint {args.name}")
    sm.create_model(
        ModelName=args.name,
        ExecutionRoleArn=ROLE,
        PrimaryContainer={
            "Image": IMAGE,
            "ModelDataUrl": model_data,
            "Environment": {
                "SAGEMAKER_PROGRAM": "inference.py",
                "SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/model/code",
                "SAGEMAKER_CONTAINER_LOG_LEVEL": "20",
                "SAGEMAKER_REGION": args.region,
            },
        },
    )
    sm.create_endpoint_config(
        EndpointConfigName=args.name,
        ProductionVariants=[{
            "VariantName": "AllTraffic",
            "ModelName": args.name,
            "InitialInstanceCount": args.instance_count,
            "InstanceType": args.instance_type,
            "InitialVariantWeight": 1.0,
        }],
    )
    sm.create_endpoint(EndpointName=args.name, EndpointConfigName=args.name)
    start = time.monotonic()
    wait_in_service(sm, args.name, args.timeout)
    print(f"endpoint {args.name} InService after {time.monotonic() - start:.1f} s")


def cleanup(sm, name):
    # The order the SageMaker SDK's Predictor.delete_endpoint + delete_model use.
    for call, kw in ((sm.delete_endpoint_config, {"EndpointConfigName": name}),
                     (sm.delete_endpoint, {"EndpointName": name}),
                     (sm.delete_model, {"ModelName": name})):
        try:
            call(**kw)
        except sm.exceptions.ClientError as e:
            if "Could not find" not in str(e):  # not created: the deployment failed before it
                print(f"cleanup: {e}", file=sys.stderr)
    print(f"deleted endpoint, endpoint config and model {name}")


def encode(rows, content_type):
    if content_type == "text/csv":
        return "".join(",".join(f"{v:g}" for v in r) + "\n" for r in rows).encode()
    if content_type == "application/json":
        return json.dumps({"instances": rows}).encode()
    import numpy as np

    buf = io.BytesIO()
    np.save(buf, np.asarray(rows, dtype=np.float32))
    return buf.getvalue()


def read_test(path):
    labels, rows = [], []
    with open(path) as f:
        for line in f:
            if line.strip():
                values = [float(v) for v in line.split(",")]
                labels.append(int(values[0]))
                rows.append(values[1:])
    return labels, rows


def main():
    args = parse_args()
    labels, rows = read_test(args.test_csv)
    if args.direct:
        def invoke(body):
            req = urllib.request.Request(args.direct.rstrip("/") + "/invocations", data=body, method="POST",
                                         headers={"Content-Type": args.content_type, "Accept": "application/json"})
            with urllib.request.urlopen(req) as resp:
                return resp.read()
        run(args, labels, rows, invoke)
        return
    sm, runtime, s3 = clients(args)
    try:
        deploy(args, sm, s3)

        def invoke(body):
            resp = runtime.invoke_endpoint(EndpointName=args.name, Body=body,
                                           ContentType=args.content_type, Accept="application/json")
            return resp["Body"].read()
        run(args, labels, rows, invoke)
    finally:
        if not args.keep:
            cleanup(sm, args.name)


def run(args, labels, rows, invoke):
    predicted = []
    for i in range(0, len(rows), args.batch):
        out = json.loads(invoke(encode(rows[i:i + args.batch], args.content_type)))
        predicted.extend(out["predictions"])
    right = sum(p == y for p, y in zip(predicted, labels))
    accuracy = right / len(labels)
    print(f"accuracy: {accuracy:.4f} ({right} of {len(labels)} held-out digits)")
    if accuracy < args.min_accuracy:
        sys.exit(f"accuracy {accuracy:.4f} is below --min-accuracy {args.min_accuracy}")


if __name__ == "__main__":
    main()
