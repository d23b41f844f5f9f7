package schema

import (
	"reflect"
	"sort"
	"strings"
	"testing"
)

// These tests state, independently of the goldens, the shape kube-apiserver
// 1.37 gives a group/version document: what kubectl and client-go rely on.

type wantOp struct {
	id, action string
	params     []string // operation-level parameter names, sorted
	body       []string // request body media types, sorted; nil = no body
	codes      []string // response codes
}

func resourcePaths(version, plural, kind string) map[string]map[string]wantOp {
	gv := strings.ToUpper(version[:1]) + version[1:]
	p := "Coordination" + gv
	list := []string{"allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit", "resourceVersion",
		"resourceVersionMatch", "sendInitialEvents", "shardSelector", "timeoutSeconds", "watch"}
	write := []string{"dryRun", "fieldManager", "fieldValidation"}
	del := []string{"dryRun", "gracePeriodSeconds", "ignoreStoreReadErrorWithClusterBreakingPotential", "orphanDependents", "propagationPolicy"}
	delColl := []string{"continue", "dryRun", "fieldSelector", "gracePeriodSeconds", "ignoreStoreReadErrorWithClusterBreakingPotential",
		"labelSelector", "limit", "orphanDependents", "propagationPolicy", "resourceVersion", "resourceVersionMatch",
		"sendInitialEvents", "shardSelector", "timeoutSeconds"}
	anyType := []string{"*/*"}
	patch := []string{"application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json"}
	root := "/apis/coordination.k8s.io/" + version
	ns := root + "/namespaces/{namespace}/" + plural
	return map[string]map[string]wantOp{
		root + "/":                {"get": {id: "get" + p + "APIResources", codes: []string{"200", "401"}}},
		root + "/" + plural:       {"get": {id: "list" + p + kind + "ForAllNamespaces", action: "list", codes: []string{"200", "401"}}},
		root + "/watch/" + plural: {"get": {id: "watch" + p + kind + "ListForAllNamespaces", action: "watchlist", codes: []string{"200", "401"}}},
		ns: {
			"get":    {id: "list" + p + "Namespaced" + kind, action: "list", params: list, codes: []string{"200", "401"}},
			"post":   {id: "create" + p + "Namespaced" + kind, action: "post", params: write, body: anyType, codes: []string{"200", "201", "202", "401"}},
			"delete": {id: "delete" + p + "CollectionNamespaced" + kind, action: "deletecollection", params: delColl, body: anyType, codes: []string{"200", "401"}},
		},
		ns + "/{name}": {
			"get":    {id: "read" + p + "Namespaced" + kind, action: "get", codes: []string{"200", "401"}},
			"put":    {id: "replace" + p + "Namespaced" + kind, action: "put", params: write, body: anyType, codes: []string{"200", "201", "401"}},
			"delete": {id: "delete" + p + "Namespaced" + kind, action: "delete", params: del, body: anyType, codes: []string{"200", "202", "401"}},
			"patch":  {id: "patch" + p + "Namespaced" + kind, action: "patch", params: append(write, "force"), body: patch, codes: []string{"200", "201", "401"}},
		},
		root + "/watch/namespaces/{namespace}/" + plural:             {"get": {id: "watch" + p + "Namespaced" + kind + "List", action: "watchlist", codes: []string{"200", "401"}}},
		root + "/watch/namespaces/{namespace}/" + plural + "/{name}": {"get": {id: "watch" + p + "Namespaced" + kind, action: "watch", codes: []string{"200", "401"}}},
	}
}

func paramNames(v interface{}) []string {
	var out []string
	list, _ := v.([]interface{})
	for _, p := range list {
		out = append(out, p.(obj)["name"].(string))
	}
	sort.Strings(out)
	return out
}

func checkGroupVersionDocument(t *testing.T, version, plural, kind string, schemas []string) {
	doc := v3Doc(t, group, version)
	if at(t, doc, "openapi") != "3.0.0" || at(t, doc, "info", "version") != "1.37" || at(t, doc, "info", "title") != "Kubernetes" {
		t.Errorf("header = %v %v", doc["openapi"], doc["info"])
	}
	want := resourcePaths(version, plural, kind)
	paths := at(t, doc, "paths").(obj)
	var wantPaths []string
	for p := range want {
		wantPaths = append(wantPaths, p)
	}
	sort.Strings(wantPaths)
	if got := sortedKeys(paths); !reflect.DeepEqual(got, wantPaths) {
		t.Fatalf("paths = %q, want %q", got, wantPaths)
	}
	tag := "coordination_" + version
	for path, ops := range want {
		item := paths[path].(obj)
		for method, w := range ops {
			op := at(t, item, method).(obj)
			if op["operationId"] != w.id {
				t.Errorf("%s %s operationId = %v, want %s", method, path, op["operationId"], w.id)
			}
			if tags := op["tags"].([]interface{}); len(tags) != 1 || tags[0] != tag {
				t.Errorf("%s %s tags = %v", method, path, tags)
			}
			if w.action != "" {
				if op["x-kubernetes-action"] != w.action {
					t.Errorf("%s %s action = %v, want %s", method, path, op["x-kubernetes-action"], w.action)
				}
				gvk := at(t, op, "x-kubernetes-group-version-kind")
				if !reflect.DeepEqual(gvk, obj{"group": group, "version": version, "kind": kind}) {
					t.Errorf("%s %s gvk = %v", method, path, gvk)
				}
			}
			if got := paramNames(op["parameters"]); !reflect.DeepEqual(got, w.params) {
				t.Errorf("%s %s parameters = %q, want %q", method, path, got, w.params)
			}
			var body []string
			if rb, ok := op["requestBody"].(obj); ok {
				body = sortedKeys(rb["content"])
			}
			if !reflect.DeepEqual(body, w.body) {
				t.Errorf("%s %s request body types = %q, want %q", method, path, body, w.body)
			}
			if got := sortedKeys(op["responses"]); !reflect.DeepEqual(got, w.codes) {
				t.Errorf("%s %s responses = %q, want %q", method, path, got, w.codes)
			}
		}
	}
	// Path-level (common) parameters of the item path.
	item := paths["/apis/coordination.k8s.io/"+version+"/namespaces/{namespace}/"+plural+"/{name}"].(obj)
	if got := paramNames(item["parameters"]); !reflect.DeepEqual(got, []string{"name", "namespace", "pretty"}) {
		t.Errorf("item path parameters = %q", got)
	}
	for _, p := range item["parameters"].([]interface{}) {
		p := p.(obj)
		wantIn := "path"
		if p["name"] == "pretty" {
			wantIn = "query"
		}
		if p["in"] != wantIn || (wantIn == "path") != (p["required"] == true) {
			t.Errorf("parameter %v: in=%v required=%v", p["name"], p["in"], p["required"])
		}
		if !reflect.DeepEqual(p["schema"], obj{"type": "string", "uniqueItems": true}) {
			t.Errorf("parameter %v schema = %v", p["name"], p["schema"])
		}
	}
	// Media types of a read response and of a list (which can stream watches).
	read := at(t, item, "get", "responses", "200", "content")
	if got := sortedKeys(read); !reflect.DeepEqual(got, []string{"application/json", "application/vnd.kubernetes.protobuf", "application/yaml"}) {
		t.Errorf("read media types = %q", got)
	}
	ref := at(t, read, "application/json", "schema", "$ref")
	if ref != "#/components/schemas/io.k8s.api.coordination."+version+"."+kind {
		t.Errorf("read response schema = %v", ref)
	}
	list := at(t, paths, "/apis/coordination.k8s.io/"+version+"/"+plural, "get", "responses", "200", "content")
	if got := sortedKeys(list); len(got) != 5 || got[1] != "application/json;stream=watch" {
		t.Errorf("list media types = %q", got)
	}
	if got := sortedKeys(at(t, doc, "components", "schemas")); !reflect.DeepEqual(got, schemas) {
		t.Errorf("component schemas = %q\nwant %q", got, schemas)
	}
	if at(t, doc, "components", "securitySchemes", "BearerToken", "type") != "apiKey" {
		t.Error("BearerToken security scheme missing")
	}
	// The schema of the kind carries its group/version/kind, which is how
	// kubectl explain and apply find it.
	gvks := at(t, doc, "components", "schemas", "io.k8s.api.coordination."+version+"."+kind, "x-kubernetes-group-version-kind")
	if !reflect.DeepEqual(gvks, []interface{}{obj{"group": group, "version": version, "kind": kind}}) {
		t.Errorf("%s gvk = %v", kind, gvks)
	}
	// Option and event kinds are listed for "" v1 and this group/version only.
	for _, k := range []string{"DeleteOptions", "WatchEvent"} {
		gvks := at(t, doc, "components", "schemas", metaV1+k, "x-kubernetes-group-version-kind")
		want := []interface{}{obj{"group": "", "version": "v1", "kind": k}, obj{"group": group, "version": version, "kind": k}}
		if !reflect.DeepEqual(gvks, want) {
			t.Errorf("%s gvk = %v", k, gvks)
		}
	}
}

var metaSchemas = []string{
	metaV1 + "APIResource", metaV1 + "APIResourceList", metaV1 + "DeleteOptions", metaV1 + "FieldsV1",
	metaV1 + "ListMeta", metaV1 + "ManagedFieldsEntry", metaV1 + "MicroTime", metaV1 + "ObjectMeta",
	metaV1 + "OwnerReference", metaV1 + "Patch", metaV1 + "Preconditions", metaV1 + "ShardInfo", metaV1 + "Status",
	metaV1 + "StatusCause", metaV1 + "StatusDetails", metaV1 + "Time", metaV1 + "WatchEvent",
	"io.k8s.apimachinery.pkg.runtime.RawExtension",
}

func TestV3LeaseDocument(t *testing.T) {
	schemas := append([]string{"io.k8s.api.coordination.v1.Lease", "io.k8s.api.coordination.v1.LeaseList", "io.k8s.api.coordination.v1.LeaseSpec"}, metaSchemas...)
	checkGroupVersionDocument(t, "v1", "leases", "Lease", schemas)
}

func TestV3LeaseCandidateDocuments(t *testing.T) {
	for _, v := range []string{"v1beta1", "v1alpha2"} {
		p := "io.k8s.api.coordination." + v + "."
		schemas := append([]string{p + "LeaseCandidate", p + "LeaseCandidateList", p + "LeaseCandidateSpec"}, metaSchemas...)
		checkGroupVersionDocument(t, v, "leasecandidates", "LeaseCandidate", schemas)
	}
}

func TestV3GroupDocument(t *testing.T) {
	doc := v3Doc(t, group, "")
	op := at(t, doc, "paths", "/apis/coordination.k8s.io/", "get").(obj)
	if op["operationId"] != "getCoordinationAPIGroup" || op["description"] != "get information of a group" {
		t.Errorf("group operation = %v", op)
	}
	want := []string{metaV1 + "APIGroup", metaV1 + "GroupVersionForDiscovery", metaV1 + "ServerAddressByClientCIDR"}
	if got := sortedKeys(at(t, doc, "components", "schemas")); !reflect.DeepEqual(got, want) {
		t.Errorf("group document schemas = %q", got)
	}
	// 1.37 no longer wraps array items in allOf with a default.
	items := at(t, doc, "components", "schemas", metaV1+"APIGroup", "properties", "versions", "items")
	if !reflect.DeepEqual(items, obj{"$ref": "#/components/schemas/" + metaV1 + "GroupVersionForDiscovery"}) {
		t.Errorf("versions items = %v", items)
	}
}
