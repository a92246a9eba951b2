"""Drive sagebox's control plane with boto3 the way the SageMaker SDK does.

Usage: python3 boto3_client.py ENDPOINT_URL JOB_NAME

Creates JOB_NAME and a second job, describes, lists (paginator) and stops,
then reads the job's logs exactly as sagemaker.session.logs_for_job does:
DescribeLogStreams(prefix=job/, orderBy=LogStreamName, limit=min(count, 50))
while the response carries nextToken (without passing it back), then for
each stream GetLogEvents(startTime=<last ts>, startFromHead=True[, nextToken])
until a page is empty, merged by timestamp with a (timestamp, skip)
position per stream. Prints one JSON object with what it saw.
"""

import json
import sys

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

GROUP = "/aws/sagemaker/TrainingJobs"


def clients(endpoint):
    session = boto3.session.Session(
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret",
        region_name="us-east-1",
    )
    cfg = Config(retries={"max_attempts": 1})
    return (
        session.client("sagemaker", endpoint_url=endpoint, config=cfg),
        session.client("logs", endpoint_url=endpoint, config=cfg),
    )


def create_request(name):
    return dict(
        TrainingJobName=name,
        AlgorithmSpecification={
            "TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-cpu-py311",
            "TrainingInputMode": "File",
            "EnableSageMakerMetricsTimeSeries": True,
        },
        RoleArn="arn:aws:iam::123456789012:role/SageMakerRole",
        HyperParameters={"epochs": "1", "sagemaker_program": json.dumps("train.py")},
        InputDataConfig=[{
            "ChannelName": "training",
            "DataSource": {"S3DataSource": {
                "S3DataType": "S3Prefix", "S3Uri": "s3://bucket/data",
                "S3DataDistributionType": "FullyReplicated"}},
        }],
        OutputDataConfig={"S3OutputPath": "s3://bucket/"},
        ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30},
        StoppingCondition={"MaxRuntimeInSeconds": 86400},
        DebugHookConfig={"S3OutputPath": "s3://bucket/", "CollectionConfigurations": []},
        ProfilerConfig={"S3OutputPath": "s3://bucket/", "DisableProfiler": False},
    )


def log_stream(logs, stream, start_time, skip):
    """One stream's events from start_time on, skipping the first `skip`."""
    token = None
    while True:
        args = {"nextToken": token} if token is not None else {}
        resp = logs.get_log_events(logGroupName=GROUP, logStreamName=stream,
                                   startTime=start_time, startFromHead=True, **args)
        token = resp["nextForwardToken"]
        events = resp["events"]
        if not events:
            return
        if len(events) > skip:
            events, skip = events[skip:], 0
        else:
            skip, events = skip - len(events), []
        for ev in events:
            yield ev


def read_logs(logs, job, instance_count, positions):
    """One round of logs_for_job: find the streams, read what is new."""
    streams = []
    resp = logs.describe_log_streams(logGroupName=GROUP, logStreamNamePrefix=job + "/",
                                     orderBy="LogStreamName", limit=min(instance_count, 50))
    streams += [s["logStreamName"] for s in resp["logStreams"]]
    rounds = 1
    while "nextToken" in resp:  # the SDK's loop: the token is never passed back
        rounds += 1
        if rounds > 5:
            raise RuntimeError("DescribeLogStreams keeps returning nextToken")
        resp = logs.describe_log_streams(logGroupName=GROUP, logStreamNamePrefix=job + "/",
                                         orderBy="LogStreamName", limit=min(instance_count, 50))
    printed = []
    iters = {s: log_stream(logs, s, *positions.get(s, (0, 0))) for s in streams}
    heads = {s: next(it, None) for s, it in iters.items()}
    while any(heads.values()):
        s = min((s for s in heads if heads[s]), key=lambda s: heads[s]["timestamp"])
        ev = heads[s]
        printed.append(s + " " + ev["message"])
        ts, count = positions.get(s, (0, 0))
        positions[s] = (ts, count + 1) if ev["timestamp"] == ts else (ev["timestamp"], 1)
        heads[s] = next(iters[s], None)
    return streams, printed


def main():
    endpoint, job = sys.argv[1], sys.argv[2]
    sm, logs = clients(endpoint)
    out = {}

    out["arn"] = sm.create_training_job(**create_request(job))["TrainingJobArn"]
    sm.create_training_job(**create_request(job + "-2"))
    try:
        sm.create_training_job(**create_request(job))
    except ClientError as e:
        out["duplicate"] = e.response["Error"]["Code"]

    d = sm.describe_training_job(TrainingJobName=job)
    out["describe"] = {
        "status": d["TrainingJobStatus"],
        "secondary": d["SecondaryStatus"],
        "message": d["SecondaryStatusTransitions"][-1]["StatusMessage"],
        "last_modified": d["LastModifiedTime"].isoformat(),
        "instance_count": d["ResourceConfig"]["InstanceCount"],
        "profiling": d["ProfilingStatus"],
    }
    try:
        sm.describe_training_job(TrainingJobName="no-such-job")
    except ClientError as e:
        out["missing"] = [e.response["Error"]["Code"], e.response["Error"]["Message"]]

    names = []
    for page in sm.get_paginator("list_training_jobs").paginate(PaginationConfig={"PageSize": 1}):
        names += [s["TrainingJobName"] for s in page["TrainingJobSummaries"]]
    out["listed"] = names
    out["listed_resumed"] = [s["TrainingJobName"] for s in resume_pages(sm.get_paginator("list_training_jobs"), "NextToken", "TrainingJobSummaries")]

    positions = {}
    out["streams"], out["printed"] = read_logs(logs, job, d["ResourceConfig"]["InstanceCount"], positions)
    # A second round finds nothing new and must not repeat a line.
    _, out["printed_again"] = read_logs(logs, job, d["ResourceConfig"]["InstanceCount"], positions)

    try:
        logs.describe_log_streams(logGroupName="/aws/sagemaker/Nothing")
    except ClientError as e:
        out["missing_group"] = e.response["Error"]["Code"]

    f = logs.filter_log_events(logGroupName=GROUP, logStreamNamePrefix=job + "/", filterPattern="?loss ?ERROR")
    out["filtered"] = [e["logStreamName"] + " " + e["message"] for e in f["events"]]
    resumed = resume_pages(logs.get_paginator("filter_log_events"), "nextToken", "events",
                           logGroupName=GROUP, logStreamNamePrefix=job + "/", filterPattern="?loss ?ERROR")
    out["filtered_resumed"] = [e["logStreamName"] + " " + e["message"] for e in resumed]

    sm.stop_training_job(TrainingJobName=job)
    out["stopped"] = sm.describe_training_job(TrainingJobName=job)["TrainingJobStatus"]
    try:
        sm.stop_training_job(TrainingJobName=job)
    except ClientError as e:
        out["stop_again"] = e.response["Error"]["Message"]

    json.dump(out, sys.stdout)


def resume_pages(paginator, token_key, items_key, **kw):
    """Pages one item at a time, each time resuming the paginator from the
    service's own raw token as StartingToken: what the SageMaker Python SDK's
    live endpoint logging does with FilterLogEvents' nextToken
    (session.py _live_logging_deploy_done). botocore first tries to read a
    StartingToken as its own base64 JSON, so a service token must not decode
    as one."""
    got, token = [], None
    while True:
        cfg = {"PageSize": 1, "MaxItems": 1}
        if token:
            cfg["StartingToken"] = token
        page = next(iter(paginator.paginate(PaginationConfig=cfg, **kw)))
        got += page[items_key]
        token = page.get(token_key)
        if not token:
            return got


if __name__ == "__main__":
    main()
