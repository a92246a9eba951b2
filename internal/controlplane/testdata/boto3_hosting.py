"""Replay the SageMaker Python SDK v2's hosting call sequences with boto3.

Usage: python3 boto3_hosting.py ENDPOINT_URL

Each sequence is the one sdk-v2-audit.md §1.3, §1.5, §1.6 and §1.7 records
(the SDK's own request bodies, made with botocore, whose client-side
validation is part of what is checked): estimator.deploy, update_endpoint
(DescribeEndpointConfig's ProductionVariants sent back to
CreateEndpointConfig verbatim), PipelineModel.deploy, delete_model and
delete_endpoint. The server's fake hosting promotes endpoints to InService
shortly after each deployment. Prints one JSON object with what it saw.
"""

import json
import sys
import time

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

REGION = "us-east-1"
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-inference:1.13.1-cpu-py39"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


def client(endpoint):
    session = boto3.session.Session(
        aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret", region_name=REGION)
    return session.client("sagemaker", endpoint_url=endpoint, config=Config(retries={"max_attempts": 1}))


def container(name):
    return {
        "Image": IMAGE,
        "ModelDataUrl": "s3://sagemaker-us-east-1-123456789012/%s/model.tar.gz" % name,
        "Environment": {
            "SAGEMAKER_PROGRAM": "inference.py",
            "SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/model/code",
            "SAGEMAKER_CONTAINER_LOG_LEVEL": "20",
            "SAGEMAKER_REGION": REGION,
        },
    }


def error_of(fn, **kw):
    try:
        fn(**kw)
    except ClientError as e:
        return [e.response["Error"]["Code"], e.response["Error"]["Message"]]
    return None


def wait_for_endpoint(sm, name, seen):
    """session.wait_for_endpoint / _deploy_done: poll while Creating or Updating."""
    for _ in range(200):
        desc = sm.describe_endpoint(EndpointName=name)
        status = desc["EndpointStatus"]
        if not seen or seen[-1] != status:
            seen.append(status)
        if status not in ("Creating", "Updating"):
            if status != "InService":
                raise RuntimeError("Error hosting endpoint %s: %s. Reason: %s" % (name, status, desc.get("FailureReason")))
            return desc
        time.sleep(0.05)
    raise RuntimeError("endpoint %s never left %s" % (name, status))


def deploy(sm, name, model_request, out, key):
    """estimator.deploy: one name for model, config and endpoint (§1.3)."""
    sm.create_model(**model_request)
    # A second deploy of the same model: the SDK logs the error and goes on.
    dup = error_of(sm.create_model, **model_request)
    sm.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[{
            "VariantName": "AllTraffic", "ModelName": name, "InitialVariantWeight": 1,
            "InitialInstanceCount": 1, "InstanceType": "ml.m5.xlarge",
        }])
    arn = sm.create_endpoint(EndpointName=name, EndpointConfigName=name, Tags=[])["EndpointArn"]
    seen = []
    first = sm.describe_endpoint(EndpointName=name)["EndpointStatus"]
    desc = wait_for_endpoint(sm, name, seen)
    out[key] = {
        "duplicate_model": dup, "arn": arn, "first_status": first, "statuses": seen,
        "config_name": desc["EndpointConfigName"],
        "variants": [[v["VariantName"], v["CurrentWeight"], v["CurrentInstanceCount"]] for v in desc.get("ProductionVariants", [])],
    }


def update_endpoint(sm, name, new_config, out):
    """Predictor.update_endpoint() with no arguments (§1.6)."""
    current = sm.describe_endpoint(EndpointName=name)["EndpointConfigName"]
    model_names = [v["ModelName"] for v in sm.describe_endpoint_config(EndpointConfigName=current)["ProductionVariants"] if "ModelName" in v]
    # create_endpoint_config_from_existing
    existing = sm.describe_endpoint_config(EndpointConfigName=current)
    tags = sm.list_tags(ResourceArn=existing["EndpointConfigArn"])["Tags"]
    request = {"EndpointConfigName": new_config, "ProductionVariants": existing["ProductionVariants"]}
    for key in ("KmsKeyId", "DataCaptureConfig", "AsyncInferenceConfig", "ExplainerConfig"):
        if existing.get(key):
            request[key] = existing[key]
    if tags:
        request["Tags"] = tags
    # botocore validates ProductionVariants here: an unknown member fails
    # with ParamValidationError before anything is sent.
    sm.create_endpoint_config(**request)
    # Session.update_endpoint: _deployment_entity_exists, then UpdateEndpoint.
    sm.describe_endpoint(EndpointName=name)
    arn = sm.update_endpoint(EndpointName=name, EndpointConfigName=new_config)["EndpointArn"]
    first = sm.describe_endpoint(EndpointName=name)["EndpointStatus"]
    seen = []
    desc = wait_for_endpoint(sm, name, seen)
    out["update"] = {
        "models": model_names, "config_tags": tags, "arn": arn, "first_status": first, "statuses": seen,
        "config_name": desc["EndpointConfigName"],
        "new_variants": sm.describe_endpoint_config(EndpointConfigName=new_config)["ProductionVariants"],
    }


def missing(sm, name):
    """Session._deployment_entity_exists: ValidationException + 'Could not find' means absent."""
    try:
        sm.describe_endpoint(EndpointName=name)
    except ClientError as e:
        err = e.response["Error"]
        if err["Code"] == "ValidationException" and "Could not find" in err["Message"]:
            return err["Message"]
        raise
    return None


def main():
    endpoint = sys.argv[1]
    sm = client(endpoint)
    out = {}
    name = "pytorch-training-2026-03-01-12-00-00-000"

    deploy(sm, name, {"ModelName": name, "ExecutionRoleArn": ROLE, "PrimaryContainer": container(name)}, out, "deploy")
    out["tags"] = {
        kind: sm.list_tags(ResourceArn="arn:aws:sagemaker:%s:123456789012:%s/%s" % (REGION, kind, name), MaxResults=50)["Tags"]
        for kind in ("model", "endpoint-config", "endpoint", "training-job")
    }
    sm.add_tags(ResourceArn=out["deploy"]["arn"], Tags=[{"Key": "stage", "Value": "dev"}])
    out["endpoint_tags"] = sm.list_tags(ResourceArn=out["deploy"]["arn"])["Tags"]

    update_endpoint(sm, name, name + "-2", out)

    weights = sm.update_endpoint_weights_and_capacities(
        EndpointName=name, DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": 2}])
    seen = []
    desc = wait_for_endpoint(sm, name, seen)
    out["weights"] = {"arn": weights["EndpointArn"], "statuses": seen,
                      "variants": [[v["VariantName"], v["CurrentInstanceCount"]] for v in desc["ProductionVariants"]]}
    out["unknown_variant"] = error_of(sm.update_endpoint_weights_and_capacities, EndpointName=name,
                                      DesiredWeightsAndCapacities=[{"VariantName": "Nope", "DesiredWeight": 1.0}])

    # Predictor.delete_model() while the endpoint is live (§1.5).
    config = sm.describe_endpoint(EndpointName=name)["EndpointConfigName"]
    for v in sm.describe_endpoint_config(EndpointConfigName=config)["ProductionVariants"]:
        sm.delete_model(ModelName=v["ModelName"])
    out["after_delete_model"] = sm.describe_endpoint(EndpointName=name)["EndpointStatus"]
    # Predictor.delete_endpoint(): the config first, then the endpoint.
    sm.delete_endpoint_config(EndpointConfigName=config)
    sm.delete_endpoint(EndpointName=name)
    out["gone"] = missing(sm, name)
    out["config_gone"] = error_of(sm.describe_endpoint_config, EndpointConfigName=config)
    out["model_gone"] = error_of(sm.describe_model, ModelName=name)
    # The SDK leaks the first config after an update, as on AWS.
    out["old_config"] = sm.describe_endpoint_config(EndpointConfigName=name)["EndpointConfigName"]

    # PipelineModel.deploy (§1.7): one CreateModel with Containers.
    pipe = "pytorch-inference-2026-03-01-12-00-01-000"
    deploy(sm, pipe, {"ModelName": pipe, "ExecutionRoleArn": ROLE, "Containers": [container(pipe + "-1"), container(pipe + "-2")]}, out, "pipeline")
    pm = sm.describe_model(ModelName=pipe)
    out["pipeline"]["containers"] = len(pm["Containers"])
    out["pipeline"]["has_primary"] = "PrimaryContainer" in pm
    out["listed"] = [e["EndpointName"] for e in sm.list_endpoints(SortBy="Name", SortOrder="Ascending")["Endpoints"]]
    out["models"] = [m["ModelName"] for m in sm.list_models()["Models"]]
    sm.delete_endpoint(EndpointName=pipe)

    print(json.dumps(out))


if __name__ == "__main__":
    main()
