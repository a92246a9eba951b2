// Package toolkit is the SageMaker training toolkit's contract in Go: what
// a training script sees, decided from the TrainingJob alone.
//
// NewSpec decodes and validates a job once (hyperparameters through
// pyvalue, channels, distribution, hosts algo-1..N); its errors are
// ClientErrors. From a Spec and one Host it gives what SageMaker's
// containers give a script: the /opt/ml layout (Workspace), the three
// input/config files (ConfigFiles, PrepareHostTree), every SM_* variable
// and SM_TRAINING_ENV (Spec.Env, over a Platform layer the caller fills
// in), and the argv of python, torchrun or mpirun (EntryKindOf,
// Spec.Command). When the script has run it gives SageMaker's texts for
// what happened: AlgorithmError, ExecuteUserScriptError (with ErrorCapture
// picking the traceback out of the log), InstallError, and the metric
// values that MetricDefinitions find in log lines (CompileMetrics).
// How the hosts' names resolve (Names: each host its own loopback address
// in the job's hosts file, or the nss_wrapper fallback) is in hostnames.go.
//
// It starts no processes and knows no stores: the lifecycle that stages,
// launches and watches a job is internal/training, and how that is done on
// this machine is internal/proc and internal/staging. Its only I/O is
// writing a host's config files and output/failure, and the small probes
// of this machine that the contract's texts depend on (a free MASTER_PORT,
// mpirun on PATH, libnss_wrapper).
//
// The SageMaker facts this reproduces are in
// shared/reference/training-contract.md.
package toolkit
