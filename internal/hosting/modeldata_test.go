package hosting

import (
	"testing"

	"github.com/sagebox/sagebox"
)

// The model data layouts the SDK and users produce: the repack's archive
// (first entry "/"), the ≤ 1.1 layout (code in a sourcedir.tar.gz named by
// SAGEMAKER_SUBMIT_DIRECTORY) and uncompressed data under an S3 prefix.
func TestModelDataLayouts(t *testing.T) {
	e := newEnv(t, nil)
	repack := e.put("repack/model.tar.gz", tarGzRoot(t, modelFiles("repack"), true))
	mRepack := model("repack", repack)

	old := e.put("old/model.tar.gz", tarGz(t, map[string]string{"model.pt": string(modelPT), "version.txt": "old"}))
	src := e.put("old/sourcedir.tar.gz", tarGz(t, map[string]string{"inference.py": inferencePy}))
	mOld := model("old", old)
	mOld.PrimaryContainer.Environment["SAGEMAKER_SUBMIT_DIRECTORY"] = src

	for name, body := range modelFiles("prefix") {
		e.put("raw/model/"+name, []byte(body))
	}
	mPrefix := model("prefix", "")
	mPrefix.PrimaryContainer.ModelDataSource = &sagebox.ModelDataSource{S3DataSource: &sagebox.S3ModelDataSource{
		S3Uri: "s3://models/raw/model/", S3DataType: "S3Prefix", CompressionType: "None",
	}}

	for name, m := range map[string]sagebox.Model{"repack": mRepack, "old": mOld, "prefix": mPrefix} {
		if err := e.create(name, deployment(variant("AllTraffic", m, 1, 1))); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"repack", "old", "prefix"} {
		e.waitStatus(name, sagebox.EndpointInService)
		if a, err := e.routes.invoke(name, 0); err != nil || a.Version != name || a.Y[0][0] != 12 {
			t.Errorf("%s: %+v %v", name, a, err)
		}
	}
}
