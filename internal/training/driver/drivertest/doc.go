// Package drivertest is the conformance suite of training drivers
// (driver.Driver): Run checks, on a real backend, each behaviour the
// lifecycle in internal/training relies on. A driver's own test supplies
// a Harness and calls Run; the fake driver (driver/fake) passes it in
// memory, the local driver with real processes.
//
// What a host does is a Script: lines to print, files to write into the
// model directory or output/failure, a SIGTERM handler, how long to run,
// an exit code. The fake plays it in a goroutine; PythonScript turns the
// scripts of a job into one train.py for backends that run real code.
//
// The suite synchronises on the task's output, never on sleeps: a script
// installs its handler and writes its files before it prints its lines,
// so once the last line is in Output the script is ready for a signal.
// Each wait is bounded by Harness.Timeout. Every task a subtest starts is
// killed at its end, and every job it prepares is Released (failed).
//
// # A harness for the local driver
//
// The local driver (internal/training/local) runs the real toolkit, so its
// harness builds a real sagebox.TrainingJob whose submit directory holds
// the generated train.py, decodes it with toolkit.NewSpec and hands both
// to the suite. Sketch, with the env helpers of internal/training's tests
// (object store with bucket "bkt", putSource, extractObject):
//
//	func TestConformance(t *testing.T) {
//		dataDir := t.TempDir()
//		store := openStore(t, dataDir)            // objectstore over dataDir/s3, bucket "bkt"
//		drivertest.Run(t, drivertest.Harness{
//			New: func(t *testing.T) driver.Driver {
//				// same data dir and store each time: a restarted server
//				return local.New(local.Config{DataDir: dataDir, Python: python3,
//					ShimCommand: []string{os.Args[0], "exec-shim"}, ...}, localobj.New(store), logger)
//			},
//			Job: func(t *testing.T, name string, scripts []drivertest.Script) *driver.Job {
//				hps := putSource(t, store, name, map[string]string{
//					"train.py": drivertest.PythonScript(scripts),
//				}) // sourcedir.tar.gz at s3://bkt/<name>/source/; sagemaker_program "train.py"
//				tj := &sagebox.TrainingJob{
//					TrainingJobName:  name,
//					TrainingJobArn:   "arn:aws:sagemaker:us-east-1:000000000000:training-job/" + name,
//					HyperParameters:  hps,
//					ResourceConfig:   &sagebox.ResourceConfig{InstanceType: "ml.m5.large", InstanceCount: len(scripts)},
//					OutputDataConfig: &sagebox.OutputDataConfig{S3OutputPath: "s3://bkt/output"},
//				}
//				spec, err := toolkit.NewSpec(tj, "us-east-1")
//				if err != nil {
//					t.Fatal(err)
//				}
//				job := &driver.Job{Name: name, Spec: spec,
//					StateDir: filepath.Join(dataDir, "jobs", name, ".sagebox")} // the same on every call for name
//				for i, h := range spec.Hosts {
//					job.Hosts = append(job.Hosts, toolkit.Host{Index: i, Name: h})
//				}
//				return job
//			},
//			ReadModel: func(t *testing.T, uri string) map[string]string {
//				key := strings.TrimPrefix(uri, "s3://bkt/")
//				return extractObject(t, store, key) // untar into t.TempDir(), path → content
//			},
//			ReadHostFile: func(t *testing.T, job *driver.Job, host int, rel string) (string, bool) {
//				b, err := os.ReadFile(filepath.Join(job.Hosts[host].Workspace.Root, filepath.FromSlash(rel)))
//				return string(b), err == nil
//			},
//		})
//	}
//
// testdata/local_conformance_test.go.txt is that harness written out in
// full against internal/training/local as of commit f099bce (it passed the
// whole suite there, -race included): copy it to
// internal/training/local/conformance_test.go.
//
// TestMain must double as the shim (proc.RunSupervisor on "exec-shim"),
// as internal/training's does, and the test should skip without
// /usr/bin/python3 unless SAGEBOX_STRICT_TOOLS=1. Its processes outlive a
// driver instance on purpose (Recover); the suite kills each by Signal.
package drivertest
