// Package python embeds sagebox's Python runtime package, sagebox_runtime,
// so the single sagebox binary can write it out and run it with the user's
// interpreter (see internal/pyruntime).
package python

import "embed"

// FS holds the sagebox_runtime package and sitecustomize.py (which points
// old botocore at AWS_ENDPOINT_URL in the processes sagebox starts, whose
// PYTHONPATH holds this directory). The all: prefix keeps __init__.py and
// __main__.py, which a plain directory embed would skip.
//
//go:embed all:sagebox_runtime sitecustomize.py
var FS embed.FS
