package instances

import (
	"fmt"
	"slices"
	"strings"
)

// Kind names how an instances request fails to map onto a model's inputs.
type Kind uint8

// The mapping failures, each a client mistake.
const (
	// NotArray: "instances" is not a non-empty array.
	NotArray Kind = iota + 1
	// NoInputs: the model has no inputs to map instances to.
	NoInputs
	// NotBatching: Count instances for a model without batching.
	NotBatching
	// MixedForms: objects keyed by input name beside plain values.
	MixedForms
	// NotKeyed: a plain value for a model of several inputs.
	NotKeyed
	// UnknownInput: instance Instance names Input, which the model lacks.
	UnknownInput
	// InputsDiffer: instance Instance names the inputs Named, instance 0
	// the inputs FirstNamed.
	InputsDiffer
	// MissingInput: no instance gives the required input Input.
	MissingInput
	// ShapeMismatch: Input's row in instance Instance has shape Shape,
	// instance 0's has First.
	ShapeMismatch
	// CountMismatch: Input's row in instance Instance holds Count values
	// where its shape Shape holds Want.
	CountMismatch
	// ParamsNotObject: "parameters" is not an object.
	ParamsNotObject
)

// Error is a mapping failure: the request is well-formed JSON, but its
// instances do not fit the model. The clouds answer it 400, each in its
// own words where they differ (sagemaker rephrases some kinds); Error is
// the wording Vertex answers with.
type Error struct {
	Kind     Kind
	Model    string
	Inputs   []string // the model's input names, in configuration order
	Instance int
	Input    string
	Count    int64
	Want     int64
	Shape    []int64
	First    []int64
	// Named and FirstNamed are the inputs instance Instance and instance 0
	// name (InputsDiffer), sorted.
	Named, FirstNamed []string
}

func (e *Error) Error() string {
	inputs := strings.Join(e.Inputs, ", ")
	switch e.Kind {
	case NotArray:
		return "'instances' must be a non-empty JSON array"
	case NoInputs:
		return fmt.Sprintf("model '%s' has no inputs to map 'instances' to", e.Model)
	case NotBatching:
		return fmt.Sprintf("model '%s' does not support batching (max_batch_size 0): send exactly one instance, got %d", e.Model, e.Count)
	case MixedForms:
		return "instances mix objects keyed by input name with plain values; use one form for all instances"
	case NotKeyed:
		return fmt.Sprintf("model '%s' has %d inputs (%s): each instance must be an object keyed by input name", e.Model, len(e.Inputs), inputs)
	case UnknownInput:
		return fmt.Sprintf("instance %d: model '%s' has no input '%s' (inputs: %s)", e.Instance, e.Model, e.Input, inputs)
	case InputsDiffer:
		return fmt.Sprintf("instance %d has inputs [%s] but instance 0 has [%s]; every instance must name the same inputs",
			e.Instance, strings.Join(e.Named, ", "), strings.Join(e.FirstNamed, ", "))
	case MissingInput:
		return fmt.Sprintf("instances lack input '%s' of model '%s' (inputs: %s)", e.Input, e.Model, inputs)
	case ShapeMismatch:
		return fmt.Sprintf("input '%s': instance %d has shape %v but instance 0 has %v; instances must agree", e.Input, e.Instance, e.Shape, e.First)
	case CountMismatch:
		return fmt.Sprintf("input '%s', instance %d has %d values, want %d (row shape %v)", e.Input, e.Instance, e.Count, e.Want, e.Shape)
	case ParamsNotObject:
		return "'parameters' must be a JSON object"
	}
	return fmt.Sprintf("instances do not map onto model '%s'", e.Model)
}

// Lacks is the first input of instance 0 that instance Instance does not
// name (InputsDiffer), "" when it names them all.
func (e *Error) Lacks() string {
	for _, name := range e.FirstNamed {
		if !slices.Contains(e.Named, name) {
			return name
		}
	}
	return ""
}
