package controlplane_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/smithy-go"

	"github.com/sagebox/sagebox"
)

// sdkConfig points aws-sdk-go-v2 at the test server with static
// credentials and no retries.
func (e *env) sdkConfig() aws.Config {
	return aws.Config{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		BaseEndpoint:     aws.String(e.srv.URL),
		RetryMaxAttempts: 1,
	}
}

func sdkCreateInput(name string) *sagemaker.CreateTrainingJobInput {
	return &sagemaker.CreateTrainingJobInput{
		TrainingJobName: aws.String(name),
		RoleArn:         aws.String("arn:aws:iam::123456789012:role/SageMakerRole"),
		AlgorithmSpecification: &smtypes.AlgorithmSpecification{
			TrainingImage:     aws.String("763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-cpu-py311"),
			TrainingInputMode: smtypes.TrainingInputModeFile,
			MetricDefinitions: []smtypes.MetricDefinition{{Name: aws.String("loss"), Regex: aws.String(`loss=([0-9.]+)`)}},
		},
		HyperParameters: map[string]string{"sagemaker_program": `"train.py"`, "epochs": "2"},
		InputDataConfig: []smtypes.Channel{{
			ChannelName: aws.String("training"),
			DataSource: &smtypes.DataSource{S3DataSource: &smtypes.S3DataSource{
				S3DataType: smtypes.S3DataTypeS3Prefix, S3Uri: aws.String("s3://bucket/data"),
			}},
		}},
		OutputDataConfig:  &smtypes.OutputDataConfig{S3OutputPath: aws.String("s3://bucket/output")},
		ResourceConfig:    &smtypes.ResourceConfig{InstanceType: smtypes.TrainingInstanceTypeMlM5Xlarge, InstanceCount: aws.Int32(2), VolumeSizeInGB: aws.Int32(30)},
		StoppingCondition: &smtypes.StoppingCondition{MaxRuntimeInSeconds: aws.Int32(3600)},
		Tags:              []smtypes.Tag{{Key: aws.String("team"), Value: aws.String("ml")}},
	}
}

// TestAWSSDKSageMaker drives the training-job operations through
// aws-sdk-go-v2's sagemaker client.
func TestAWSSDKSageMaker(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sm := sagemaker.NewFromConfig(e.sdkConfig())

	for i := 0; i < 5; i++ {
		out, err := sm.CreateTrainingJob(ctx, sdkCreateInput(fmt.Sprintf("sdk-job-%d", i)))
		if err != nil {
			t.Fatalf("CreateTrainingJob: %v", err)
		}
		if want := fmt.Sprintf("arn:aws:sagemaker:us-east-1:123456789012:training-job/sdk-job-%d", i); aws.ToString(out.TrainingJobArn) != want {
			t.Errorf("arn = %s", aws.ToString(out.TrainingJobArn))
		}
		e.clock.Advance(time.Second)
	}

	_, err := sm.CreateTrainingJob(ctx, sdkCreateInput("sdk-job-0"))
	var inUse *smtypes.ResourceInUse
	if !errors.As(err, &inUse) {
		t.Errorf("duplicate: err = %v; want *types.ResourceInUse", err)
	}

	// The runner would move the job along; do it by hand.
	end := sagebox.NewTime(startTime().Add(time.Hour))
	if _, err := e.jobs.UpdateTrainingJob(ctx, "sdk-job-1", func(j *sagebox.TrainingJob) error {
		j.TrainingJobStatus, j.SecondaryStatus = sagebox.StatusCompleted, sagebox.SecondaryCompleted
		j.ModelArtifacts = &sagebox.ModelArtifacts{S3ModelArtifacts: "s3://bucket/output/sdk-job-1/output/model.tar.gz"}
		j.TrainingEndTime, j.LastModifiedTime = end, end
		j.FinalMetricDataList = []sagebox.MetricData{{MetricName: "loss", Value: 0.125, Timestamp: end}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	d, err := sm.DescribeTrainingJob(ctx, &sagemaker.DescribeTrainingJobInput{TrainingJobName: aws.String("sdk-job-1")})
	if err != nil {
		t.Fatalf("DescribeTrainingJob: %v", err)
	}
	if d.TrainingJobStatus != smtypes.TrainingJobStatusCompleted || aws.ToString(d.ModelArtifacts.S3ModelArtifacts) != "s3://bucket/output/sdk-job-1/output/model.tar.gz" {
		t.Errorf("describe: %s %+v", d.TrainingJobStatus, d.ModelArtifacts)
	}
	if aws.ToInt32(d.ResourceConfig.InstanceCount) != 2 || !d.LastModifiedTime.Equal(end.Time) || !d.CreationTime.Equal(startTime().Add(time.Second)) {
		t.Errorf("describe: count %d, modified %v, created %v", aws.ToInt32(d.ResourceConfig.InstanceCount), d.LastModifiedTime, d.CreationTime)
	}
	if len(d.SecondaryStatusTransitions) != 1 || aws.ToString(d.SecondaryStatusTransitions[0].StatusMessage) == "" {
		t.Errorf("transitions = %+v", d.SecondaryStatusTransitions)
	}
	if len(d.FinalMetricDataList) != 1 || aws.ToFloat32(d.FinalMetricDataList[0].Value) != 0.125 {
		t.Errorf("metrics = %+v", d.FinalMetricDataList)
	}

	_, err = sm.DescribeTrainingJob(ctx, &sagemaker.DescribeTrainingJobInput{TrainingJobName: aws.String("missing")})
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ValidationException" || apiErr.ErrorMessage() != "Requested resource not found." {
		t.Errorf("missing job: %v", err)
	}

	var names []string
	pages := sagemaker.NewListTrainingJobsPaginator(sm, &sagemaker.ListTrainingJobsInput{MaxResults: aws.Int32(2), SortOrder: smtypes.SortOrderAscending})
	for n := 0; pages.HasMorePages(); n++ {
		if n > 5 {
			t.Fatal("paginator does not end")
		}
		page, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatalf("ListTrainingJobs: %v", err)
		}
		for _, s := range page.TrainingJobSummaries {
			names = append(names, aws.ToString(s.TrainingJobName))
		}
	}
	if want := []string{"sdk-job-0", "sdk-job-1", "sdk-job-2", "sdk-job-3", "sdk-job-4"}; !reflect.DeepEqual(names, want) {
		t.Errorf("listed %v; want %v", names, want)
	}
	completed, err := sm.ListTrainingJobs(ctx, &sagemaker.ListTrainingJobsInput{StatusEquals: smtypes.TrainingJobStatusCompleted})
	if err != nil || len(completed.TrainingJobSummaries) != 1 || completed.TrainingJobSummaries[0].TrainingEndTime == nil {
		t.Errorf("completed filter: %+v, %v", completed, err)
	}

	if _, err := sm.StopTrainingJob(ctx, &sagemaker.StopTrainingJobInput{TrainingJobName: aws.String("sdk-job-2")}); err != nil {
		t.Fatalf("StopTrainingJob: %v", err)
	}
	_, err = sm.StopTrainingJob(ctx, &sagemaker.StopTrainingJobInput{TrainingJobName: aws.String("sdk-job-1")})
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ValidationException" {
		t.Errorf("stopping a completed job: %v", err)
	}
	stopped, _ := sm.DescribeTrainingJob(ctx, &sagemaker.DescribeTrainingJobInput{TrainingJobName: aws.String("sdk-job-2")})
	if stopped.TrainingJobStatus != smtypes.TrainingJobStatusStopping || stopped.SecondaryStatus != smtypes.SecondaryStatusStopping {
		t.Errorf("after stop: %s/%s", stopped.TrainingJobStatus, stopped.SecondaryStatus)
	}

	bad := sdkCreateInput("bad_name")
	_, err = sm.CreateTrainingJob(ctx, bad)
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ValidationException" ||
		apiErr.ErrorMessage() != "1 validation error detected: Value 'bad_name' at 'trainingJobName' failed to satisfy constraint: Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}" {
		t.Errorf("bad name: %v", err)
	}
}

// TestAWSSDKLogs drives the log operations through aws-sdk-go-v2's
// cloudwatchlogs client, including its paginators.
func TestAWSSDKLogs(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.seedLogs(t, trainingGroup, 25, "sdk-job/algo-1-1", "sdk-job/algo-2-1")
	cw := cloudwatchlogs.NewFromConfig(e.sdkConfig())

	ds, err := cw.DescribeLogStreams(ctx, &cloudwatchlogs.DescribeLogStreamsInput{
		LogGroupName: aws.String(trainingGroup), LogStreamNamePrefix: aws.String("sdk-job/"),
		OrderBy: "LogStreamName", Limit: aws.Int32(2),
	})
	if err != nil {
		t.Fatalf("DescribeLogStreams: %v", err)
	}
	if len(ds.LogStreams) != 2 || ds.NextToken != nil || aws.ToInt64(ds.LogStreams[1].LastEventTimestamp) != 1024 {
		t.Errorf("streams = %+v, token %v", ds.LogStreams, ds.NextToken)
	}

	var got int
	events := cloudwatchlogs.NewGetLogEventsPaginator(cw, &cloudwatchlogs.GetLogEventsInput{
		LogGroupName: aws.String(trainingGroup), LogStreamName: aws.String("sdk-job/algo-1-1"),
		StartFromHead: aws.Bool(true), StartTime: aws.Int64(0), Limit: aws.Int32(10),
	}, func(o *cloudwatchlogs.GetLogEventsPaginatorOptions) { o.StopOnDuplicateToken = true })
	for n := 0; events.HasMorePages(); n++ {
		if n > 10 {
			t.Fatal("GetLogEvents paginator does not end: the forward token is not stable")
		}
		page, err := events.NextPage(ctx)
		if err != nil {
			t.Fatalf("GetLogEvents: %v", err)
		}
		got += len(page.Events)
	}
	if got != 25 {
		t.Errorf("GetLogEvents read %d events; want 25", got)
	}

	var filtered []string
	filter := cloudwatchlogs.NewFilterLogEventsPaginator(cw, &cloudwatchlogs.FilterLogEventsInput{
		LogGroupName: aws.String(trainingGroup), LogStreamNamePrefix: aws.String("sdk-job/"),
		FilterPattern: aws.String(`?"line 1" ?"line 2"`), Limit: aws.Int32(5),
	})
	for n := 0; filter.HasMorePages(); n++ {
		if n > 10 {
			t.Fatal("FilterLogEvents paginator does not end")
		}
		page, err := filter.NextPage(ctx)
		if err != nil {
			t.Fatalf("FilterLogEvents: %v", err)
		}
		for _, ev := range page.Events {
			filtered = append(filtered, aws.ToString(ev.Message))
		}
	}
	// "line 1", "line 2" and "line 10".."line 24" in each of two streams.
	if len(filtered) != 2*17 {
		t.Errorf("FilterLogEvents matched %d events; want %d", len(filtered), 2*17)
	}

	_, err = cw.DescribeLogStreams(ctx, &cloudwatchlogs.DescribeLogStreamsInput{LogGroupName: aws.String("/missing")})
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ResourceNotFoundException" {
		t.Errorf("missing group: %v", err)
	}
}

// TestAWSSDKHosting drives the hosting operations through aws-sdk-go-v2,
// whose typed deserialisers refuse a response member of the wrong shape.
func TestAWSSDKHosting(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sm := sagemaker.NewFromConfig(e.sdkConfig())
	e.hosting.set(func(f *fakeHosting) { f.autoPromote = true })

	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{
		ModelName:        aws.String("go-model"),
		ExecutionRoleArn: aws.String("arn:aws:iam::123456789012:role/SageMakerRole"),
		Containers: []smtypes.ContainerDefinition{
			{ContainerHostname: aws.String("pre"), ModelDataUrl: aws.String("s3://b/pre.tar.gz"), Environment: map[string]string{"SAGEMAKER_PROGRAM": "pre.py"}},
			{ContainerHostname: aws.String("main"), ModelDataSource: &smtypes.ModelDataSource{S3DataSource: &smtypes.S3ModelDataSource{
				S3Uri: aws.String("s3://b/main/"), S3DataType: smtypes.S3ModelDataTypeS3Prefix, CompressionType: smtypes.ModelCompressionTypeNone}}},
		},
		InferenceExecutionConfig: &smtypes.InferenceExecutionConfig{Mode: smtypes.InferenceExecutionModeDirect},
		Tags:                     []smtypes.Tag{{Key: aws.String("team"), Value: aws.String("ml")}},
	}); err != nil {
		t.Fatalf("CreateModel: %v", err)
	}
	m, err := sm.DescribeModel(ctx, &sagemaker.DescribeModelInput{ModelName: aws.String("go-model")})
	if err != nil {
		t.Fatalf("DescribeModel: %v", err)
	}
	if len(m.Containers) != 2 || m.InferenceExecutionConfig.Mode != smtypes.InferenceExecutionModeDirect ||
		m.Containers[1].ModelDataSource.S3DataSource.S3DataType != smtypes.S3ModelDataTypeS3Prefix || !m.CreationTime.Equal(startTime()) {
		t.Errorf("DescribeModel = %+v", m)
	}
	if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{
		EndpointConfigName: aws.String("go-config"),
		ProductionVariants: []smtypes.ProductionVariant{{
			VariantName: aws.String("AllTraffic"), ModelName: aws.String("go-model"), InitialInstanceCount: aws.Int32(2),
			InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large, InitialVariantWeight: aws.Float32(0.5),
		}},
	}); err != nil {
		t.Fatalf("CreateEndpointConfig: %v", err)
	}
	c, err := sm.DescribeEndpointConfig(ctx, &sagemaker.DescribeEndpointConfigInput{EndpointConfigName: aws.String("go-config")})
	if err != nil {
		t.Fatalf("DescribeEndpointConfig: %v", err)
	}
	if v := c.ProductionVariants; len(v) != 1 || aws.ToInt32(v[0].InitialInstanceCount) != 2 || aws.ToFloat32(v[0].InitialVariantWeight) != 0.5 || v[0].VolumeSizeInGB != nil {
		t.Errorf("DescribeEndpointConfig variants = %+v", v)
	}
	ep, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("go-endpoint"), EndpointConfigName: aws.String("go-config")})
	if err != nil {
		t.Fatalf("CreateEndpoint: %v", err)
	}
	d, err := sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("go-endpoint")})
	if err != nil {
		t.Fatalf("DescribeEndpoint: %v", err)
	}
	if d.EndpointStatus != smtypes.EndpointStatusInService || aws.ToString(d.EndpointArn) != aws.ToString(ep.EndpointArn) ||
		len(d.ProductionVariants) != 1 || aws.ToInt32(d.ProductionVariants[0].CurrentInstanceCount) != 2 || aws.ToFloat32(d.ProductionVariants[0].CurrentWeight) != 0.5 {
		t.Errorf("DescribeEndpoint = %+v", d)
	}
	if _, err := sm.UpdateEndpointWeightsAndCapacities(ctx, &sagemaker.UpdateEndpointWeightsAndCapacitiesInput{
		EndpointName:                aws.String("go-endpoint"),
		DesiredWeightsAndCapacities: []smtypes.DesiredWeightAndCapacity{{VariantName: aws.String("AllTraffic"), DesiredInstanceCount: aws.Int32(1)}},
	}); err != nil {
		t.Fatalf("UpdateEndpointWeightsAndCapacities: %v", err)
	}
	list, err := sm.ListEndpoints(ctx, &sagemaker.ListEndpointsInput{StatusEquals: smtypes.EndpointStatusInService})
	if err != nil || len(list.Endpoints) != 1 || list.Endpoints[0].LastModifiedTime == nil {
		t.Errorf("ListEndpoints = %+v, %v", list, err)
	}
	models, err := sm.ListModels(ctx, &sagemaker.ListModelsInput{})
	if err != nil || len(models.Models) != 1 {
		t.Errorf("ListModels = %+v, %v", models, err)
	}
	configs, err := sm.ListEndpointConfigs(ctx, &sagemaker.ListEndpointConfigsInput{NameContains: aws.String("go")})
	if err != nil || len(configs.EndpointConfigs) != 1 {
		t.Errorf("ListEndpointConfigs = %+v, %v", configs, err)
	}
	tags, err := sm.ListTags(ctx, &sagemaker.ListTagsInput{ResourceArn: aws.String("arn:aws:sagemaker:us-east-1:123456789012:model/go-model")})
	if err != nil || len(tags.Tags) != 1 || aws.ToString(tags.Tags[0].Key) != "team" {
		t.Errorf("ListTags = %+v, %v", tags, err)
	}
	if _, err := sm.DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: aws.String("go-endpoint")}); err != nil {
		t.Fatalf("DeleteEndpoint: %v", err)
	}
	_, err = sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("go-endpoint")})
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ValidationException" ||
		apiErr.ErrorMessage() != `Could not find endpoint "arn:aws:sagemaker:us-east-1:123456789012:endpoint/go-endpoint".` {
		t.Errorf("DescribeEndpoint after delete: %v", err)
	}
	if _, err := sm.DeleteEndpointConfig(ctx, &sagemaker.DeleteEndpointConfigInput{EndpointConfigName: aws.String("go-config")}); err != nil {
		t.Errorf("DeleteEndpointConfig: %v", err)
	}
	if _, err := sm.DeleteModel(ctx, &sagemaker.DeleteModelInput{ModelName: aws.String("go-model")}); err != nil {
		t.Errorf("DeleteModel: %v", err)
	}
}
