package schema

import (
	"k8s.io/kube-openapi/pkg/common"
)

// route, param, response and container implement kube-openapi's
// common.Route family, so that its builders can turn leasehold's endpoint
// description into documents without go-restful.

type route struct {
	method      string
	path        string
	operationID string
	tags        []string
	description string
	params      []common.Parameter
	consumes    []string
	produces    []string
	metadata    map[string]interface{}
	request     interface{}
	responses   []common.StatusCodeResponse
}

func (r *route) Method() string                                   { return r.method }
func (r *route) Path() string                                     { return r.path }
func (r *route) OperationName() string                            { return r.operationID }
func (r *route) Parameters() []common.Parameter                   { return r.params }
func (r *route) Description() string                              { return r.description }
func (r *route) Consumes() []string                               { return r.consumes }
func (r *route) Produces() []string                               { return r.produces }
func (r *route) Metadata() map[string]interface{}                 { return r.metadata }
func (r *route) RequestPayloadSample() interface{}                { return r.request }
func (r *route) ResponsePayloadSample() interface{}               { return nil }
func (r *route) StatusCodeResponses() []common.StatusCodeResponse { return r.responses }

type param struct {
	name        string
	description string
	required    bool
	kind        common.ParameterKind
	dataType    string
}

func (p param) Name() string               { return p.name }
func (p param) Description() string        { return p.description }
func (p param) Required() bool             { return p.required }
func (p param) Kind() common.ParameterKind { return p.kind }
func (p param) DataType() string           { return p.dataType }

// AllowMultiple is false for every apiserver parameter (go-restful's
// default), which is why they all carry "uniqueItems": true.
func (p param) AllowMultiple() bool { return false }

type response struct {
	code    int
	message string
	model   interface{}
}

func (r response) Code() int          { return r.code }
func (r response) Message() string    { return r.message }
func (r response) Model() interface{} { return r.model }

type container struct {
	root   string
	routes []common.Route
}

func (c container) RootPath() string                   { return c.root }
func (c container) PathParameters() []common.Parameter { return nil }
func (c container) Routes() []common.Route             { return c.routes }

// operationIDAndTags reads back the id and tags our routes carry; it is the
// builders' GetOperationIDAndTagsFromRoute.
func operationIDAndTags(r common.Route) (string, []string, error) {
	if rt, ok := r.(*route); ok {
		return rt.operationID, rt.tags, nil
	}
	return r.OperationName(), nil, nil
}
