package httpapi

import (
	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/tritonjson"
)

// indexReady reads {"ready": <bool>} of a repository index body.
func indexReady(body []byte) (ready, present bool, err error) {
	doc, err := tritonjson.ParseJSON(body)
	if err != nil {
		return false, false, err
	}
	v, ok := doc.Root().Find("ready")
	if !ok {
		return false, false, nil
	}
	ready, err = v.Bool()
	if err != nil {
		return false, false, core.Errorf(core.CodeInvalidArg, "Invalid value for 'ready': expected a boolean")
	}
	return ready, true, nil
}

// loadParameters reads the "parameters" object of a load body, for
// protocol.ReadLoadParams; every value must be a JSON string (a type error
// is INTERNAL, as in Triton).
func loadParameters(body []byte) (map[string]protocol.Param, error) {
	doc, err := tritonjson.ParseJSON(body)
	if err != nil {
		return nil, err
	}
	root := doc.Root()
	params, ok := root.Find("parameters")
	if !ok {
		return nil, nil
	}
	out := map[string]protocol.Param{}
	for k, v := range params.Members() {
		s, err := v.Str()
		if err != nil {
			return nil, err
		}
		out[string(k)] = protocol.Param{Kind: protocol.ParamString, String: s}
	}
	return out, nil
}
