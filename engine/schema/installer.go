package schema

import (
	"net/http"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/kube-openapi/pkg/common"
)

// This file describes the endpoints the way the apiserver's endpoint
// installer (k8s.io/apiserver/pkg/endpoints/installer.go) registers them for
// a namespaced resource backed by the generic registry: the same operation
// ids, descriptions, parameters, media types and responses.

var (
	mediaTypes      = []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf"}
	watchMediaTypes = append(append([]string(nil), mediaTypes...),
		"application/json;stream=watch", "application/vnd.kubernetes.protobuf;stream=watch")
	patchMediaTypes = []string{
		"application/json-patch+json", "application/merge-patch+json",
		"application/strategic-merge-patch+json", "application/apply-patch+yaml",
	}
	anyMediaType = []string{"*/*"}
)

const (
	prettyDoc    = "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget)."
	namespaceDoc = "object name and auth scope, such as for teams and projects"
)

func queryParam(name, doc, dataType string) common.Parameter {
	return param{name: name, description: doc, kind: common.QueryParameterKind, dataType: dataType}
}

func pathParam(name, doc string) common.Parameter {
	return param{name: name, description: doc, required: true, kind: common.PathParameterKind, dataType: "string"}
}

func bodyParam(required bool) common.Parameter {
	return param{name: "body", required: required, kind: common.BodyParameterKind, dataType: "body"}
}

// optionParams is the apiserver's AddObjectParams: one query parameter per
// json-tagged scalar (or []string) field of an options struct, described by
// its SwaggerDoc(), typed as go-restful's typeToJSON does.
func optionParams(options interface{}, excluded ...string) []common.Parameter {
	t := reflect.TypeOf(options).Elem()
	docs := docsOf(t)
	var out []common.Parameter
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct || ft.Kind() == reflect.Interface {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || contains(excluded, name) {
			continue
		}
		dataType := "string"
		if ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		if typ, _, ok := simpleType(ft); ok && typ != "string" {
			dataType = typ
		}
		out = append(out, queryParam(name, docs[name], dataType))
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func with(params []common.Parameter, more ...common.Parameter) []common.Parameter {
	return append(append([]common.Parameter(nil), params...), more...)
}

func ok(model interface{}) common.StatusCodeResponse {
	return response{http.StatusOK, "OK", model}
}

func created(model interface{}) common.StatusCodeResponse {
	return response{http.StatusCreated, "Created", model}
}

func accepted(model interface{}) common.StatusCodeResponse {
	return response{http.StatusAccepted, "Accepted", model}
}

// gvPrefix is the operation id infix for a group/version
// (coordination.k8s.io, v1beta1 -> CoordinationV1beta1).
func gvPrefix(g, v string) string {
	return groupPrefix(g) + strings.ToUpper(v[:1]) + v[1:]
}

// groupPrefix is the camel-cased group without its .k8s.io/.io suffix
// (coordination.k8s.io -> Coordination).
func groupPrefix(g string) string {
	if g == "" {
		return "Core"
	}
	g = strings.TrimSuffix(strings.TrimSuffix(g, ".k8s.io"), ".io")
	parts := strings.Split(g, ".")
	for i, p := range parts {
		parts[i] = strings.ToUpper(p[:1]) + p[1:]
	}
	return strings.Join(parts, "")
}

// groupTag is the tag of a group's operations (coordination.k8s.io -> coordination).
func groupTag(g string) string {
	p := groupPrefix(g)
	return strings.ToLower(p[:1]) + p[1:]
}

// groupVersionRoutes returns the container for /apis/<group>/<version>: the
// resource discovery endpoint plus every resource's endpoints.
func groupVersionRoutes(gv groupVersion) common.RouteContainer {
	root := "/apis/" + gv.group + "/" + gv.version
	if gv.group == "" {
		root = "/api/" + gv.version
	}
	prefix := gvPrefix(gv.group, gv.version)
	tags := []string{groupTag(gv.group) + "_" + gv.version}
	routes := []common.Route{&route{
		method: http.MethodGet, path: root + "/", operationID: "get" + prefix + "APIResources", tags: tags,
		description: "get available resources", consumes: mediaTypes, produces: mediaTypes,
		responses: []common.StatusCodeResponse{ok(&metav1.APIResourceList{})},
	}}
	for _, r := range gv.resources {
		if r.cluster {
			routes = append(routes, clusterResourceRoutes(gv, r, root, prefix, tags)...)
			continue
		}
		routes = append(routes, resourceRoutes(gv, r, root, prefix, tags)...)
	}
	return container{root: root, routes: routes}
}

// resourceRoutes are the endpoints of one namespaced resource.
func resourceRoutes(gv groupVersion, r resource, root, prefix string, tags []string) []common.Route {
	kind := r.kind
	pretty := queryParam("pretty", prettyDoc, "string")
	ns := pathParam("namespace", namespaceDoc)
	name := pathParam("name", "name of the "+kind)
	listParams := optionParams(&metav1.ListOptions{})
	deleteCollectionParams := with(optionParams(&metav1.ListOptions{}, "watch", "allowWatchBookmarks"), optionParams(&metav1.DeleteOptions{})...)
	meta := func(action string) map[string]interface{} {
		return map[string]interface{}{
			"x-kubernetes-action":             action,
			"x-kubernetes-group-version-kind": metav1.GroupVersionKind{Group: gv.group, Version: gv.version, Kind: kind},
		}
	}
	collection := root + "/namespaces/{namespace}/" + r.plural
	item := collection + "/{name}"
	watchDesc := "watch individual changes to a list of " + kind + ". deprecated: use the 'watch' parameter with a list operation instead."
	status := &metav1.Status{}
	event := &metav1.WatchEvent{}
	mk := func(method, path, op, desc, action string, params []common.Parameter, consumes, produces []string, body interface{}, resps ...common.StatusCodeResponse) *route {
		return &route{method: method, path: path, operationID: op, tags: tags, description: desc, params: params,
			consumes: consumes, produces: produces, metadata: meta(action), request: body, responses: resps}
	}
	return []common.Route{
		mk(http.MethodGet, root+"/"+r.plural, "list"+prefix+kind+"ForAllNamespaces", "list or watch objects of kind "+kind, "list",
			with(listParams, pretty), anyMediaType, watchMediaTypes, nil, ok(r.list)),
		mk(http.MethodGet, collection, "list"+prefix+"Namespaced"+kind, "list or watch objects of kind "+kind, "list",
			with(listParams, ns, pretty), anyMediaType, watchMediaTypes, nil, ok(r.list)),
		mk(http.MethodPost, collection, "create"+prefix+"Namespaced"+kind, "create a "+kind, "post",
			with(optionParams(&metav1.CreateOptions{}), ns, pretty, bodyParam(true)), anyMediaType, mediaTypes, r.object,
			ok(r.object), created(r.object), accepted(r.object)),
		mk(http.MethodDelete, collection, "delete"+prefix+"CollectionNamespaced"+kind, "delete collection of "+kind, "deletecollection",
			with(deleteCollectionParams, ns, pretty, bodyParam(false)), anyMediaType, mediaTypes, &metav1.DeleteOptions{}, ok(status)),
		mk(http.MethodGet, item, "read"+prefix+"Namespaced"+kind, "read the specified "+kind, "get",
			[]common.Parameter{name, ns, pretty}, anyMediaType, mediaTypes, nil, ok(r.object)),
		mk(http.MethodPut, item, "replace"+prefix+"Namespaced"+kind, "replace the specified "+kind, "put",
			with(optionParams(&metav1.UpdateOptions{}), name, ns, pretty, bodyParam(true)), anyMediaType, mediaTypes, r.object,
			ok(r.object), created(r.object)),
		mk(http.MethodDelete, item, "delete"+prefix+"Namespaced"+kind, "delete a "+kind, "delete",
			with(optionParams(&metav1.DeleteOptions{}), name, ns, pretty, bodyParam(false)), anyMediaType, mediaTypes, &metav1.DeleteOptions{},
			ok(status), accepted(status)),
		mk(http.MethodPatch, item, "patch"+prefix+"Namespaced"+kind, "partially update the specified "+kind, "patch",
			with(optionParams(&metav1.PatchOptions{}), name, ns, pretty, bodyParam(true)), patchMediaTypes, mediaTypes, &metav1.Patch{},
			ok(r.object), created(r.object)),
		mk(http.MethodGet, root+"/watch/"+r.plural, "watch"+prefix+kind+"ListForAllNamespaces", watchDesc, "watchlist",
			with(listParams, pretty), anyMediaType, watchMediaTypes, nil, ok(event)),
		mk(http.MethodGet, root+"/watch/namespaces/{namespace}/"+r.plural, "watch"+prefix+"Namespaced"+kind+"List", watchDesc, "watchlist",
			with(listParams, ns, pretty), anyMediaType, watchMediaTypes, nil, ok(event)),
		mk(http.MethodGet, root+"/watch/namespaces/{namespace}/"+r.plural+"/{name}", "watch"+prefix+"Namespaced"+kind,
			"watch changes to an object of kind "+kind+". deprecated: use the 'watch' parameter with a list operation instead, filtered to a single item with the 'fieldSelector' parameter.",
			"watch", with(listParams, name, ns, pretty), anyMediaType, watchMediaTypes, nil, ok(event)),
	}
}

// clusterResourceRoutes are the endpoints of one cluster-scoped resource,
// as the installer registers them for a resource without a namespace.
func clusterResourceRoutes(gv groupVersion, r resource, root, prefix string, tags []string) []common.Route {
	kind := r.kind
	pretty := queryParam("pretty", prettyDoc, "string")
	name := pathParam("name", "name of the "+kind)
	listParams := optionParams(&metav1.ListOptions{})
	meta := func(action string) map[string]interface{} {
		return map[string]interface{}{
			"x-kubernetes-action":             action,
			"x-kubernetes-group-version-kind": metav1.GroupVersionKind{Group: gv.group, Version: gv.version, Kind: kind},
		}
	}
	collection := root + "/" + r.plural
	item := collection + "/{name}"
	watchDesc := "watch individual changes to a list of " + kind + ". deprecated: use the 'watch' parameter with a list operation instead."
	status := &metav1.Status{}
	event := &metav1.WatchEvent{}
	mk := func(method, path, op, desc, action string, params []common.Parameter, consumes, produces []string, body interface{}, resps ...common.StatusCodeResponse) *route {
		return &route{method: method, path: path, operationID: op, tags: tags, description: desc, params: params,
			consumes: consumes, produces: produces, metadata: meta(action), request: body, responses: resps}
	}
	routes := []common.Route{
		mk(http.MethodGet, collection, "list"+prefix+kind, "list or watch objects of kind "+kind, "list",
			with(listParams, pretty), anyMediaType, watchMediaTypes, nil, ok(r.list)),
		mk(http.MethodPost, collection, "create"+prefix+kind, "create a "+kind, "post",
			with(optionParams(&metav1.CreateOptions{}), pretty, bodyParam(true)), anyMediaType, mediaTypes, r.object,
			ok(r.object), created(r.object), accepted(r.object)),
	}
	if !r.noDeleteCollection {
		deleteCollectionParams := with(optionParams(&metav1.ListOptions{}, "watch", "allowWatchBookmarks"), optionParams(&metav1.DeleteOptions{})...)
		routes = append(routes, mk(http.MethodDelete, collection, "delete"+prefix+"Collection"+kind, "delete collection of "+kind, "deletecollection",
			with(deleteCollectionParams, pretty, bodyParam(false)), anyMediaType, mediaTypes, &metav1.DeleteOptions{}, ok(status)))
	}
	return append(routes,
		mk(http.MethodGet, item, "read"+prefix+kind, "read the specified "+kind, "get",
			[]common.Parameter{name, pretty}, anyMediaType, mediaTypes, nil, ok(r.object)),
		mk(http.MethodPut, item, "replace"+prefix+kind, "replace the specified "+kind, "put",
			with(optionParams(&metav1.UpdateOptions{}), name, pretty, bodyParam(true)), anyMediaType, mediaTypes, r.object,
			ok(r.object), created(r.object)),
		mk(http.MethodDelete, item, "delete"+prefix+kind, "delete a "+kind, "delete",
			with(optionParams(&metav1.DeleteOptions{}), name, pretty, bodyParam(false)), anyMediaType, mediaTypes, &metav1.DeleteOptions{},
			ok(status), accepted(status)),
		mk(http.MethodPatch, item, "patch"+prefix+kind, "partially update the specified "+kind, "patch",
			with(optionParams(&metav1.PatchOptions{}), name, pretty, bodyParam(true)), patchMediaTypes, mediaTypes, &metav1.Patch{},
			ok(r.object), created(r.object)),
		mk(http.MethodGet, root+"/watch/"+r.plural, "watch"+prefix+kind+"List", watchDesc, "watchlist",
			with(listParams, pretty), anyMediaType, watchMediaTypes, nil, ok(event)),
		mk(http.MethodGet, root+"/watch/"+r.plural+"/{name}", "watch"+prefix+kind,
			"watch changes to an object of kind "+kind+". deprecated: use the 'watch' parameter with a list operation instead, filtered to a single item with the 'fieldSelector' parameter.",
			"watch", with(listParams, name, pretty), anyMediaType, watchMediaTypes, nil, ok(event)),
	)
}

// groupRoutes is the container for /apis/<group>: the group discovery document.
func groupRoutes(g string) common.RouteContainer {
	root := "/apis/" + g
	return container{root: root, routes: []common.Route{&route{
		method: http.MethodGet, path: root + "/", operationID: "get" + groupPrefix(g) + "APIGroup", tags: []string{groupTag(g)},
		description: "get information of a group", consumes: mediaTypes, produces: mediaTypes,
		responses: []common.StatusCodeResponse{ok(&metav1.APIGroup{})},
	}}}
}

// apisRoutes is the container for /apis (the group list).
func apisRoutes() common.RouteContainer {
	return container{root: "/apis", routes: []common.Route{&route{
		method: http.MethodGet, path: "/apis/", operationID: "getAPIVersions", tags: []string{"apis"},
		description: "get available API versions", consumes: mediaTypes, produces: mediaTypes,
		responses: []common.StatusCodeResponse{ok(&metav1.APIGroupList{})},
	}}}
}

// coreRoutes is the container for /api (the legacy core group's versions).
func coreRoutes() common.RouteContainer {
	return container{root: "/api", routes: []common.Route{&route{
		method: http.MethodGet, path: "/api/", operationID: "getCoreAPIVersions", tags: []string{"core"},
		description: "get available API versions", consumes: mediaTypes, produces: mediaTypes,
		responses: []common.StatusCodeResponse{ok(&metav1.APIVersions{})},
	}}}
}

// versionRoutes is the container for /version.
func versionRoutes() common.RouteContainer {
	json := []string{"application/json"}
	return container{root: "/version", routes: []common.Route{&route{
		method: http.MethodGet, path: "/version/", operationID: "getCodeVersion", tags: []string{"version"},
		description: "get the code version", consumes: json, produces: json,
		responses: []common.StatusCodeResponse{ok(&version.Info{})},
	}}}
}
