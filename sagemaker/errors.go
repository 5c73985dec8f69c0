package sagemaker

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/instances"
)

// recordError answers an instances mapping failure (platforms/instances)
// with 400, worded as SageMaker's records were before they shared Vertex
// AI's translator where the two texts differ; other errors pass unchanged.
// Since they share it, records follow Vertex AI's instance rules
// (docs/deploy.md).
func recordError(err error) error {
	var ie *instances.Error
	if !errors.As(err, &ie) {
		return err
	}
	msg := ie.Error()
	switch ie.Kind {
	case instances.NotArray:
		msg = `"instances" must be a non-empty array`
	case instances.NotBatching:
		msg = fmt.Sprintf("model '%s' does not support batching: a record holds one instance, got %d", ie.Model, ie.Count)
	case instances.NotKeyed:
		msg = fmt.Sprintf("instance %d: model '%s' has %d inputs, so an instance is an object of input name to value", ie.Instance, ie.Model, len(ie.Inputs))
	case instances.MissingInput:
		msg = fmt.Sprintf("instance 0: missing input '%s'", ie.Input)
	case instances.InputsDiffer:
		if lacks := ie.Lacks(); lacks != "" {
			msg = fmt.Sprintf("instance %d: missing input '%s'", ie.Instance, lacks)
		}
	case instances.ShapeMismatch:
		msg = fmt.Sprintf("instance %d: input '%s' has shape %v, instance 0 has %v", ie.Instance, ie.Input, ie.Shape, ie.First)
	}
	return &httpapi.StatusError{Status: http.StatusBadRequest, Msg: msg}
}
