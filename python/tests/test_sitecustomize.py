"""sagebox's sitecustomize (python/sitecustomize.py) in fresh interpreters,
as a training job gets it: on PYTHONPATH, with Debian's botocore 1.29, which
ignores AWS_ENDPOINT_URL by itself (R15 of the 12-03 reliability probe)."""

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SITE_DIR = os.path.dirname(HERE)  # python/, where sitecustomize.py is
CLEAN = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}


def run(code, env=None, extra_path=()):
    e = dict(CLEAN, PYTHONPATH=os.pathsep.join([SITE_DIR, *extra_path]), AWS_DEFAULT_REGION="us-east-1")
    e.update(env or {})
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=e, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


ENDPOINTS = """
import boto3
print(boto3.client("s3").meta.endpoint_url)
print(boto3.client("sagemaker").meta.endpoint_url)
print(boto3.client("sagemaker-runtime").meta.endpoint_url)
print(boto3.client("s3", endpoint_url="http://explicit:1").meta.endpoint_url)
"""


def test_old_botocore_gets_the_endpoint_from_the_environment():
    pytest.importorskip("boto3")
    got = run(ENDPOINTS, {"AWS_ENDPOINT_URL": "http://127.0.0.1:7070", "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:7071",
                          "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": "http://127.0.0.1:7072"})
    assert got == ["http://127.0.0.1:7071", "http://127.0.0.1:7070", "http://127.0.0.1:7072", "http://explicit:1"]


def test_ignore_configured_endpoint_urls_is_honoured():
    pytest.importorskip("boto3")
    got = run(ENDPOINTS, {"AWS_ENDPOINT_URL": "http://127.0.0.1:7070", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"})
    assert got[0] == "https://s3.amazonaws.com" and got[3] == "http://explicit:1"


def test_without_the_variables_nothing_changes_and_nothing_is_imported():
    pytest.importorskip("boto3")
    assert run("import sys; print('botocore' in sys.modules)") == ["False"]
    assert run(ENDPOINTS)[0] == "https://s3.amazonaws.com"
    assert run("import sys; print('botocore' in sys.modules)", {"AWS_ENDPOINT_URL": "http://127.0.0.1:7070"}) == ["False"]


def test_the_next_sitecustomize_still_runs(tmp_path):
    (tmp_path / "sitecustomize.py").write_text("import os\nos.environ['CHAINED'] = 'yes'\n")
    assert run("import os; print(os.environ.get('CHAINED'))", extra_path=[str(tmp_path)]) == ["yes"]


def load_module():
    spec = importlib.util.spec_from_file_location("sagebox_sitecustomize", os.path.join(SITE_DIR, "sitecustomize.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_new_botocore_is_left_alone():
    mod = load_module()
    assert mod._botocore_is_old("1.29.27") and mod._botocore_is_old("0.9")
    assert not mod._botocore_is_old("1.31.0") and not mod._botocore_is_old("1.35.2") and not mod._botocore_is_old("2.0")
    assert not mod._botocore_is_old("garbage")


def test_service_variable_names():
    mod = load_module()
    env = {"AWS_ENDPOINT_URL": "g", "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": "r"}
    assert mod._endpoint_for(env, "sagemaker-runtime") == "r"
    assert mod._endpoint_for(env, "logs") == "g"
    assert mod._endpoint_for({}, "s3") is None
