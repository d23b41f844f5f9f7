package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Version is the Kubernetes minor leasehold claims in its OpenAPI documents
// (info.version), matching the /version it reports.
const Version = "1.37"

// ErrNotFound is returned (wrapped) for a group/version or path that has no
// OpenAPI document; the web layer answers 404.
var ErrNotFound = errors.New("no OpenAPI document")

// getDefinitions builds the definitions of every root model and what it
// references, with refs rendered by ref (v2 and v3 point into different
// places of their documents).
func getDefinitions(ref common.ReferenceCallback) (map[string]common.OpenAPIDefinition, error) {
	b := &definitionBuilder{ref: ref, defs: map[string]common.OpenAPIDefinition{}}
	for _, m := range rootModels() {
		b.addType(derefType(m))
	}
	if b.err != nil {
		return nil, fmt.Errorf("generating OpenAPI definitions: %w", b.err)
	}
	return b.defs, nil
}

// definitionNamer returns the builders' GetDefinitionName for the
// group/versions a document covers: our definitions are already keyed by
// their OpenAPI names, so it only attaches x-kubernetes-group-version-kind.
func definitionNamer(gvs []groupVersion) func(string) (string, spec.Extensions) {
	gvks := definitionGVKs(gvs)
	return func(name string) (string, spec.Extensions) {
		if list, ok := gvks[name]; ok {
			return name, spec.Extensions{"x-kubernetes-group-version-kind": list}
		}
		return name, nil
	}
}

// refTo renders a definition reference the way each builder does.
func refTo(prefix string) common.ReferenceCallback {
	return func(name string) spec.Ref {
		return spec.MustCreateRef(prefix + common.EscapeJsonPointer(name))
	}
}

var bearerToken = spec3.SecuritySchemeProps{
	Type: "apiKey", Description: "Bearer Token authentication", Name: "authorization", In: "header",
}

// v3Config is kube-apiserver's OpenAPI v3 configuration, for documents that
// cover the given group/versions.
func v3Config(gvs []groupVersion) (*common.OpenAPIV3Config, error) {
	defs, err := getDefinitions(refTo("#/components/schemas/"))
	if err != nil {
		return nil, err
	}
	return &common.OpenAPIV3Config{
		Info: &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: Version}},
		CommonResponses: map[int]*spec3.Response{
			401: {ResponseProps: spec3.ResponseProps{Description: "Unauthorized"}},
		},
		Definitions:                    defs,
		GetOperationIDAndTagsFromRoute: operationIDAndTags,
		GetDefinitionName:              definitionNamer(gvs),
		SecuritySchemes:                spec3.SecuritySchemes{"BearerToken": &spec3.SecurityScheme{SecuritySchemeProps: bearerToken}},
	}, nil
}

type cachedBytes struct {
	once sync.Once
	data []byte
	err  error
}

var (
	v3Docs   sync.Map // v3 index path -> *cachedBytes
	v2Doc    cachedBytes
	defsOnce sync.Once
	defs     map[string]*spec.Schema
	defsErr  error
)

// v3Path is the /openapi/v3 index path of a group/version document.
func v3Path(g, v string) string {
	if g == "" {
		return "api/" + v
	}
	if v == "" {
		return "apis/" + g
	}
	return "apis/" + g + "/" + v
}

// V3Paths returns the paths the /openapi/v3 index lists, sorted.
func V3Paths() []string {
	paths := []string{"api", "apis", "version"}
	for _, g := range groups {
		paths = append(paths, v3Path(g, ""))
	}
	for _, gv := range served {
		paths = append(paths, v3Path(gv.group, gv.version))
	}
	sort.Strings(paths)
	return paths
}

func isV3Path(path string) bool {
	for _, p := range V3Paths() {
		if p == path {
			return true
		}
	}
	return false
}

// V3Document returns the OpenAPI v3 document of /openapi/v3/apis/<group>/<version>,
// or of the group (/openapi/v3/apis/<group>) when version is "".
func V3Document(group, version string) ([]byte, error) {
	return V3DocumentForPath(v3Path(group, version))
}

// V3DocumentForPath returns the document of any path V3Paths lists
// ("apis/coordination.k8s.io/v1", "apis", "api", "version", ...).
func V3DocumentForPath(path string) ([]byte, error) {
	path = strings.Trim(path, "/")
	if !isV3Path(path) {
		// Checked before caching so that arbitrary request paths cannot
		// grow the cache.
		return nil, fmt.Errorf("%w for %q", ErrNotFound, path)
	}
	c, _ := v3Docs.LoadOrStore(path, &cachedBytes{})
	cb := c.(*cachedBytes)
	cb.once.Do(func() { cb.data, cb.err = buildV3(path) })
	return cb.data, cb.err
}

func buildV3(path string) ([]byte, error) {
	var containers []common.RouteContainer
	var gvs []groupVersion
	switch path {
	case "api":
		containers = append(containers, coreRoutes())
	case "apis":
		containers = append(containers, apisRoutes())
	case "version":
		containers = append(containers, versionRoutes())
	default:
		for _, g := range groups {
			if v3Path(g, "") == path {
				containers = append(containers, groupRoutes(g))
			}
		}
		for _, gv := range served {
			if v3Path(gv.group, gv.version) == path {
				gvs = []groupVersion{gv}
				containers = append(containers, groupVersionRoutes(gv))
			}
		}
	}
	if len(containers) == 0 {
		return nil, fmt.Errorf("%w for %q", ErrNotFound, path)
	}
	cfg, err := v3Config(gvs)
	if err != nil {
		return nil, err
	}
	doc, err := builder3.BuildOpenAPISpecFromRoutes(containers, cfg)
	if err != nil {
		return nil, fmt.Errorf("building OpenAPI v3 document for %s: %w", path, err)
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encoding OpenAPI v3 document for %s: %w", path, err)
	}
	return out, nil
}

// V2Document returns the Swagger 2.0 document of /openapi/v2 (JSON),
// covering every served path.
func V2Document() ([]byte, error) {
	v2Doc.once.Do(func() { v2Doc.data, v2Doc.err = buildV2() })
	return v2Doc.data, v2Doc.err
}

func buildV2() ([]byte, error) {
	containers := []common.RouteContainer{coreRoutes(), apisRoutes(), versionRoutes()}
	for _, g := range groups {
		containers = append(containers, groupRoutes(g))
	}
	for _, gv := range served {
		containers = append(containers, groupVersionRoutes(gv))
	}
	defs, err := getDefinitions(refTo("#/definitions/"))
	if err != nil {
		return nil, err
	}
	cfg := &common.Config{
		ProtocolList: []string{"https"},
		Info:         &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: Version}},
		CommonResponses: map[int]spec.Response{
			401: {ResponseProps: spec.ResponseProps{Description: "Unauthorized"}},
		},
		GetDefinitions:                 func(common.ReferenceCallback) map[string]common.OpenAPIDefinition { return defs },
		GetOperationIDAndTagsFromRoute: operationIDAndTags,
		GetDefinitionName:              definitionNamer(served),
		SecurityDefinitions: &spec.SecurityDefinitions{"BearerToken": &spec.SecurityScheme{
			SecuritySchemeProps: spec.SecuritySchemeProps{
				Type: bearerToken.Type, Description: bearerToken.Description, Name: bearerToken.Name, In: bearerToken.In,
			},
		}},
		DefaultSecurity: []map[string][]string{{"BearerToken": {}}},
	}
	doc, err := builder.BuildOpenAPISpecFromRoutes(containers, cfg)
	if err != nil {
		return nil, fmt.Errorf("building OpenAPI v2 document: %w", err)
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encoding OpenAPI v2 document: %w", err)
	}
	return out, nil
}

// Definitions returns the OpenAPI v3 component schemas of every served type
// and everything they reference, keyed by definition name
// ("io.k8s.api.coordination.v1.Lease"), as kube-apiserver builds them for
// its type converter: $refs into #/components/schemas/ (wrapped in allOf
// when they have siblings) and x-kubernetes-group-version-kind listing all
// served group/versions. The map is shared: callers must not modify it.
func Definitions() map[string]*spec.Schema {
	defsOnce.Do(func() {
		cfg, err := v3Config(served)
		if err != nil {
			defsErr = err
			return
		}
		var names []string
		for _, m := range rootModels() {
			names = append(names, util.GetCanonicalTypeName(m))
		}
		defs, defsErr = builder3.BuildOpenAPIDefinitionsForResources(cfg, names...)
	})
	if defsErr != nil {
		// The inputs are fixed Go types; a failure is a programming error
		// that the package tests catch.
		panic(fmt.Sprintf("schema: building definitions: %v", defsErr))
	}
	return defs
}
