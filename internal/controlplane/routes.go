package controlplane

// routes returns the operation table: X-Amz-Target → operation. Adding an
// operation is one line here plus its typed handler method.
func (h *Handler) routes() map[string]opFunc {
	return map[string]opFunc{
		sageMakerPrefix + "CreateTrainingJob":   op(h.createTrainingJob),
		sageMakerPrefix + "DescribeTrainingJob": op(h.describeTrainingJob),
		sageMakerPrefix + "ListTrainingJobs":    op(h.listTrainingJobs),
		sageMakerPrefix + "StopTrainingJob":     op(h.stopTrainingJob),

		sageMakerPrefix + "CreateModel":   op(h.createModel),
		sageMakerPrefix + "DescribeModel": op(h.describeModel),
		sageMakerPrefix + "ListModels":    op(h.listModels),
		sageMakerPrefix + "DeleteModel":   op(h.deleteModel),

		sageMakerPrefix + "CreateEndpointConfig":   op(h.createEndpointConfig),
		sageMakerPrefix + "DescribeEndpointConfig": op(h.describeEndpointConfig),
		sageMakerPrefix + "ListEndpointConfigs":    op(h.listEndpointConfigs),
		sageMakerPrefix + "DeleteEndpointConfig":   op(h.deleteEndpointConfig),

		sageMakerPrefix + "CreateEndpoint":                     op(h.createEndpoint),
		sageMakerPrefix + "DescribeEndpoint":                   op(h.describeEndpoint),
		sageMakerPrefix + "ListEndpoints":                      op(h.listEndpoints),
		sageMakerPrefix + "UpdateEndpoint":                     op(h.updateEndpoint),
		sageMakerPrefix + "UpdateEndpointWeightsAndCapacities": op(h.updateEndpointWeightsAndCapacities),
		sageMakerPrefix + "DeleteEndpoint":                     op(h.deleteEndpoint),

		sageMakerPrefix + "AddTags":    op(h.addTags),
		sageMakerPrefix + "DeleteTags": op(h.deleteTags),
		sageMakerPrefix + "ListTags":   op(h.listTags),

		logsPrefix + "CreateLogGroup":     op(h.createLogGroup),
		logsPrefix + "CreateLogStream":    op(h.createLogStream),
		logsPrefix + "DescribeLogGroups":  op(h.describeLogGroups),
		logsPrefix + "DescribeLogStreams": op(h.describeLogStreams),
		logsPrefix + "FilterLogEvents":    op(h.filterLogEvents),
		logsPrefix + "GetLogEvents":       op(h.getLogEvents),
		logsPrefix + "PutLogEvents":       op(h.putLogEvents),
	}
}
