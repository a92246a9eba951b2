// Package staging moves a training job host's data between the object
// store and the host's /opt/ml-shaped tree: it stages the input channels
// (S3 prefix, manifest or file://; FullyReplicated and ShardedByS3Key), the
// source directory (sourcedir.tar.gz, safely extracted) and the
// checkpoints before the script runs, and collects the artifacts
// (model.tar.gz, output.tar.gz) and checkpoints after it.
//
// It reaches the object store only through Objects, an interface in its
// own, neutral types (Get, List by page token, Put with an optional size),
// so the same code runs inside the sagebox server against the on-disk
// object store (package localobj) and inside a pod that has nothing but an
// S3 endpoint (package s3obj, `sagebox stage` and `sagebox collect`). An
// Objects on this machine's disk may also implement Linker and LocalFiles:
// staging then hard-links (or reflinks) the stored files instead of
// copying their bytes.
//
// Problems with the job's inputs are *ClientError values, whose text
// ("ClientError: ...") is the job's FailureReason.
package staging
