"""Deploys one endpoint per style (style-<name>) with boto3, then runs the
router and its web page in front of them until interrupted (Ctrl-C or
SIGTERM), and deletes the endpoints, configs and models on the way out.

  python3 deploy.py --endpoint-url http://127.0.0.1:7070 --listen 127.0.0.1:8000
  → open http://127.0.0.1:8000/

The models are trained first (make_styles.py, seconds on CPU) unless
--models DIR already holds <style>/model.tar.gz for each style. --keep
leaves the endpoints up; --delete only deletes them.
"""
import argparse
import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_styles  # noqa: E402
import router  # noqa: E402

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-inference:1.13.1-cpu-py39"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--endpoint-url", default=os.environ.get("SAGEBOX_ENDPOINT", "http://127.0.0.1:7070"))
    p.add_argument("--region", default=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    p.add_argument("--styles", default=",".join(make_styles.STYLES))
    p.add_argument("--models", default=os.path.join(HERE, "models"), help="where <style>/model.tar.gz are (or go)")
    p.add_argument("--bucket", default="sagebox-default")
    p.add_argument("--instance-type", default="ml.m5.large")
    p.add_argument("--listen", default="127.0.0.1:8000", help="the router's HOST:PORT (port 0: a free one)")
    p.add_argument("--timeout", type=float, default=300, help="seconds to wait for InService")
    p.add_argument("--keep", action="store_true", help="leave the endpoints up on exit")
    p.add_argument("--delete", action="store_true", help="only delete the endpoints, configs and models")
    return p.parse_args()


def clients(args):
    import boto3

    kw = dict(endpoint_url=args.endpoint_url, region_name=args.region)
    if not os.environ.get("AWS_ACCESS_KEY_ID"):  # sagebox accepts any key on loopback
        kw.update(aws_access_key_id="sagebox", aws_secret_access_key="sagebox")
    return boto3.client("sagemaker", **kw), boto3.client("s3", **kw)


def deploy(args, sm, s3, styles):
    missing = [s for s in styles if not os.path.exists(os.path.join(args.models, s, "model.tar.gz"))]
    if missing:
        make_styles.main(args.models)
    try:
        s3.head_bucket(Bucket=args.bucket)
    except s3.exceptions.ClientError:
        s3.create_bucket(Bucket=args.bucket)
    for s in styles:
        name = "style-" + s
        key = f"style/{s}/model.tar.gz"
        s3.upload_file(os.path.join(args.models, s, "model.tar.gz"), args.bucket, key)
        sm.create_model(
            ModelName=name,
            ExecutionRoleArn=ROLE,
            PrimaryContainer={
                "Image": IMAGE,
                "ModelDataUrl": f"s3://{args.bucket}/{key}",
                "Environment": {"SAGEMAKER_PROGRAM": "inference.py", "SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/model/code",
                                "SAGEMAKER_MODEL_SERVER_WORKERS": "1", "SAGEMAKER_REGION": args.region},
            },
        )
        sm.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[{
            "VariantName": "AllTraffic", "ModelName": name, "InitialInstanceCount": 1,
            "InstanceType": args.instance_type, "InitialVariantWeight": 1.0}])
        sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
        print(f"creating endpoint {name}", flush=True)
    deadline = time.monotonic() + args.timeout
    waiting = ["style-" + s for s in styles]
    while waiting:
        for name in list(waiting):
            d = sm.describe_endpoint(EndpointName=name)
            if d["EndpointStatus"] == "InService":
                print(f"endpoint {name} InService", flush=True)
                waiting.remove(name)
            elif d["EndpointStatus"] == "Failed":
                raise SystemExit(f"endpoint {name} failed: {d.get('FailureReason')}")
        if waiting and time.monotonic() > deadline:
            raise SystemExit(f"still not InService after {args.timeout:.0f} s: {', '.join(waiting)}")
        time.sleep(0.25)


def delete(sm, styles):
    for s in styles:
        name = "style-" + s
        for call, kw in ((sm.delete_endpoint, {"EndpointName": name}),
                         (sm.delete_endpoint_config, {"EndpointConfigName": name}),
                         (sm.delete_model, {"ModelName": name})):
            try:
                call(**kw)
            except sm.exceptions.ClientError as e:
                if "Could not find" not in str(e):  # not created: the deployment failed before it
                    print(f"cleanup: {e}", file=sys.stderr)
    print(f"deleted {len(styles)} endpoints, their configs and models", flush=True)


def interrupt(signum, frame):
    raise KeyboardInterrupt


def main():
    args = parse_args()
    styles = [s for s in args.styles.split(",") if s]
    sm, s3 = clients(args)
    if args.delete:
        delete(sm, styles)
        return
    # SIGTERM ends the router like Ctrl-C does, so the endpoints are deleted.
    signal.signal(signal.SIGTERM, interrupt)
    try:
        deploy(args, sm, s3, styles)
        httpd = router.serve(router.EndpointInvoker(styles, args.endpoint_url, args.region), args.listen)
        print("open the page above; Ctrl-C stops the router and deletes the endpoints", flush=True)
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        if not args.keep:
            delete(sm, styles)


if __name__ == "__main__":
    main()
