"""sagebox's sitecustomize: AWS_ENDPOINT_URL for every botocore.

sagebox gives training jobs AWS_ENDPOINT_URL (and AWS_ENDPOINT_URL_S3) so that
boto3 in a script talks to sagebox's S3 without an endpoint_url argument, as
botocore >= 1.31 does on its own. Older botocore (Debian 12 ships 1.29)
ignores those variables and would send the script's requests to AWS. This
module, on PYTHONPATH only in processes sagebox starts, makes them work there
too: when botocore.session is first imported, and only if that botocore is
older than 1.31, Session.create_client gets the endpoint from
AWS_ENDPOINT_URL_<SERVICE> or AWS_ENDPOINT_URL when the caller gave none
(unless AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is true), the same precedence as
the newer botocore. Nothing is imported early; nothing changes when the
variables are unset. Any other sitecustomize on sys.path still runs after it.
"""


def _endpoint_for(environ, service_name):
    if environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").lower() == "true":
        return None
    key = "AWS_ENDPOINT_URL_" + service_name.upper().replace("-", "_").replace(" ", "_")
    return environ.get(key) or environ.get("AWS_ENDPOINT_URL") or None


def _botocore_is_old(version):
    try:
        major, minor = (int(x) for x in version.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) < (1, 31)


def _patch_session_module(module):
    import functools
    import inspect
    import os

    import botocore

    if not _botocore_is_old(getattr(botocore, "__version__", "")):
        return
    original = module.Session.create_client
    signature = inspect.signature(original)

    @functools.wraps(original)
    def create_client(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        if bound.arguments.get("endpoint_url") is None:
            url = _endpoint_for(os.environ, bound.arguments.get("service_name", ""))
            if url:
                bound.arguments["endpoint_url"] = url
        return original(*bound.args, **bound.kwargs)

    module.Session.create_client = create_client


def _install():
    import importlib.abc
    import os
    import sys

    if not any(k == "AWS_ENDPOINT_URL" or k.startswith("AWS_ENDPOINT_URL_") for k in os.environ):
        return

    class _BotocoreSessionHook(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "botocore.session":
                return None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None and spec.loader is not None:
                    break
            else:
                return None
            sys.meta_path.remove(self)  # once is enough
            exec_module = spec.loader.exec_module

            def exec_and_patch(module):
                exec_module(module)
                try:
                    _patch_session_module(module)
                except Exception as e:  # never break the user's import
                    print("sagebox: could not point old botocore at AWS_ENDPOINT_URL:", e, file=sys.stderr)

            spec.loader.exec_module = exec_and_patch
            return spec

    sys.meta_path.insert(0, _BotocoreSessionHook())


def _chain():
    """Runs the next sitecustomize on sys.path (Debian has one), which this
    module shadows."""
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    seen_here = False
    for d in sys.path:
        d = os.path.abspath(d or ".")
        if d == here:
            seen_here = True
            continue
        if not seen_here:
            continue
        p = os.path.join(d, "sitecustomize.py")
        if os.path.isfile(p):
            with open(p, "rb") as f:
                code = compile(f.read(), p, "exec")
            exec(code, {"__name__": "sitecustomize", "__file__": p})
            return


try:
    _install()
except Exception:  # a sitecustomize must never stop the interpreter
    pass
try:
    _chain()
except Exception:
    pass
