"""Deploys the two-model serial pipeline (classifier → postprocess) as ONE
SageMaker model with Containers=[...] and InferenceExecutionConfig Serial,
invokes it with held-out digits plus two rows the classifier should not be
trusted with (a blank one, one on the raw 0-16 scale), prints what the
pipeline decided, and deletes the endpoint, config and model (unless --keep).

  python3 deploy_and_invoke.py --endpoint-url http://127.0.0.1:7070

The last line printed is a JSON summary:
  summary: {"rows": 62, "ok": 58, "uncertain": 2, "rejected": [{"row": 60, "reason": "..."}, ...],
            "accuracy_ok": 1.0}
Exit status 1 when a planted bad row is not rejected or accuracy_ok < --min-accuracy.

--direct URL sends the same request to a model server that serves both
containers itself (`sagebox model-server --containers pipeline.json`).
"""
import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-inference:1.13.1-cpu-py39"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
CONTAINERS = ("classifier", "postprocess")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--endpoint-url", default=os.environ.get("SAGEBOX_ENDPOINT", "http://127.0.0.1:7070"))
    p.add_argument("--region", default=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    p.add_argument("--direct", metavar="URL", help="invoke this model server instead of deploying")
    p.add_argument("--models", default=os.path.join(HERE, "models"), help="make_models.py's output (made if missing)")
    p.add_argument("--name", default="digits-pipeline")
    p.add_argument("--bucket", default="sagebox-default")
    p.add_argument("--instance-type", default="ml.m5.large")
    p.add_argument("--rows", type=int, default=60, help="held-out rows to send")
    p.add_argument("--content-type", default="text/csv", choices=["text/csv", "application/json"])
    p.add_argument("--min-accuracy", type=float, default=0.9)
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--keep", action="store_true")
    return p.parse_args()


def clients(args):
    import boto3

    kw = dict(endpoint_url=args.endpoint_url, region_name=args.region)
    if not os.environ.get("AWS_ACCESS_KEY_ID"):  # sagebox accepts any key on loopback
        kw.update(aws_access_key_id="sagebox", aws_secret_access_key="sagebox")
    return boto3.client("sagemaker", **kw), boto3.client("sagemaker-runtime", **kw), boto3.client("s3", **kw)


def deploy(args, sm, s3):
    try:
        s3.head_bucket(Bucket=args.bucket)
    except s3.exceptions.ClientError:
        s3.create_bucket(Bucket=args.bucket)
    containers = []
    for c in CONTAINERS:
        key = f"{args.name}/{c}/model.tar.gz"
        s3.upload_file(os.path.join(args.models, c, "model.tar.gz"), args.bucket, key)
        containers.append({
            "ContainerHostname": c,
            "Image": IMAGE,
            "ModelDataUrl": f"s3://{args.bucket}/{key}",
            "Environment": {"SAGEMAKER_PROGRAM": "inference.py", "SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/model/code",
                            "SAGEMAKER_MODEL_SERVER_WORKERS": "1", "SAGEMAKER_REGION": args.region},
        })
    sm.create_model(ModelName=args.name, ExecutionRoleArn=ROLE, Containers=containers,
                    InferenceExecutionConfig={"Mode": "Serial"})
    sm.create_endpoint_config(EndpointConfigName=args.name, ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": args.name, "InitialInstanceCount": 1,
        "InstanceType": args.instance_type, "InitialVariantWeight": 1.0}])
    sm.create_endpoint(EndpointName=args.name, EndpointConfigName=args.name)
    deadline = time.monotonic() + args.timeout
    while True:
        d = sm.describe_endpoint(EndpointName=args.name)
        if d["EndpointStatus"] == "InService":
            print(f"endpoint {args.name} InService ({' → '.join(CONTAINERS)})", flush=True)
            return
        if d["EndpointStatus"] == "Failed":
            sys.exit(f"endpoint {args.name} failed: {d.get('FailureReason')}")
        if time.monotonic() > deadline:
            sys.exit(f"endpoint {args.name} still {d['EndpointStatus']} after {args.timeout:.0f} s")
        time.sleep(0.25)


def cleanup(sm, name):
    for call, kw in ((sm.delete_endpoint, {"EndpointName": name}),
                     (sm.delete_endpoint_config, {"EndpointConfigName": name}),
                     (sm.delete_model, {"ModelName": name})):
        try:
            call(**kw)
        except sm.exceptions.ClientError as e:
            if "Could not find" not in str(e):  # not created: the deployment failed before it
                print(f"cleanup: {e}", file=sys.stderr)
    print(f"deleted endpoint, endpoint config and model {name}", flush=True)


def requests(args):
    """Held-out rows, then a blank row and a held-out row on the raw 0-16 scale."""
    labels, rows = [], []
    with open(os.path.join(args.models, "test.csv")) as f:
        for line in f:
            if line.strip() and len(rows) < args.rows:
                values = [float(v) for v in line.split(",")]
                labels.append(int(values[0]))
                rows.append(values[1:])
    planted = {len(rows): "blank", len(rows) + 1: "out of range"}
    rows.append([0.0] * 64)
    rows.append([v * 16 for v in rows[0]])
    if args.content_type == "text/csv":
        body = "".join(",".join(f"{v:g}" for v in r) + "\n" for r in rows).encode()
    else:
        body = json.dumps(rows).encode()
    return body, labels, planted


def report(results, labels, planted, min_accuracy):
    summary = {"rows": len(results), "ok": 0, "uncertain": 0, "rejected": [], "accuracy_ok": None}
    right = 0
    for i, r in enumerate(results):
        if r["status"] == "rejected":
            summary["rejected"].append({"row": i, "reason": r["reason"]})
            print(f"row {i}: rejected ({r['reason']})")
        elif r["status"] == "uncertain":
            summary["uncertain"] += 1
            print(f"row {i}: uncertain, maybe {r['label']} ({r['confidence']:.2f})")
        else:
            summary["ok"] += 1
            right += i < len(labels) and r["label"] == labels[i]
    if summary["ok"]:
        summary["accuracy_ok"] = round(right / summary["ok"], 4)
        print(f"{summary['ok']} rows answered with confidence, {right} of them right")
    print("summary: " + json.dumps(summary), flush=True)
    rejected = {r["row"] for r in summary["rejected"]}
    for row, what in planted.items():
        if row not in rejected:
            sys.exit(f"the {what} row {row} was not rejected: {results[row]}")
    if (summary["accuracy_ok"] or 0) < min_accuracy:
        sys.exit(f"accuracy {summary['accuracy_ok']} is below {min_accuracy}")


def main():
    args = parse_args()
    if not os.path.exists(os.path.join(args.models, "test.csv")):
        subprocess.run([sys.executable, os.path.join(HERE, "make_models.py"), args.models], check=True)
    body, labels, planted = requests(args)
    if args.direct:
        req = urllib.request.Request(args.direct.rstrip("/") + "/invocations", data=body, method="POST",
                                     headers={"Content-Type": args.content_type, "Accept": "application/json"})
        with urllib.request.urlopen(req) as resp:
            report(json.loads(resp.read())["results"], labels, planted, args.min_accuracy)
        return
    sm, runtime, s3 = clients(args)
    try:
        deploy(args, sm, s3)
        resp = runtime.invoke_endpoint(EndpointName=args.name, Body=body, ContentType=args.content_type,
                                       Accept="application/json")
        report(json.loads(resp["Body"].read())["results"], labels, planted, args.min_accuracy)
    finally:
        if not args.keep:
            cleanup(sm, args.name)


if __name__ == "__main__":
    main()
