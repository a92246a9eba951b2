"""Model 2 of the pipeline: turns model 1's probabilities into decisions, and
uses the request the endpoint received to do it.

Its own request is model 1's answer ({"probabilities": [...]}); the client's
rows come from context.original_request (.body, .content_type), a sagebox
extension to the SageMaker handler contract. With them it rejects rows model 1
answered but should not have been asked about:
  - "out of range": pixel values outside [0, 1] (e.g. the raw 0-16 scale of
    scikit-learn's digits, not divided by 16): model 1 clamped them and is
    often confidently wrong;
  - "blank": (almost) no ink at all;
and marks answers below a confidence threshold as "uncertain".

Response (application/json):
  {"results": [{"label": 3, "confidence": 0.98, "status": "ok"},
               {"label": null, "confidence": 0.61, "status": "rejected", "reason": "blank: ..."}, ...]}
config.json in the model directory sets min_confidence and min_ink.
"""
import json
import os

from rows import parse_rows


def model_fn(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        return json.load(f)


def input_fn(body, content_type, context):
    probabilities = json.loads(body)["probabilities"]
    original = context.original_request
    rows = parse_rows(original.body, original.content_type)
    if len(rows) != len(probabilities):
        raise ValueError(f"{len(rows)} rows in the request but {len(probabilities)} answers from model 1")
    return rows, probabilities


def judge(row, probs, config):
    confidence = max(probs)
    label = probs.index(confidence)
    result = {"label": label, "confidence": round(confidence, 4), "status": "ok"}
    low, high = min(row), max(row)
    if low < 0.0 or high > 1.0:
        reason = f"out of range: pixel values span [{low:g}, {high:g}], the model reads [0, 1]"
    elif sum(row) < config["min_ink"]:
        reason = f"blank: total ink {sum(row):.2f} is below {config['min_ink']}"
    elif confidence < config["min_confidence"]:
        result["status"] = "uncertain"
        return result
    else:
        return result
    result.update(label=None, status="rejected", reason=reason)
    return result


def predict_fn(data, config):
    rows, probabilities = data
    return [judge(r, p, config) for r, p in zip(rows, probabilities)]


def output_fn(results, accept):
    return json.dumps({"results": results}), "application/json"
